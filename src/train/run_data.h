// The built-in data sets' evaluation batches and fingerprints, shared by training (run.cpp)
// and `mixp eval` (evaluate_run.cpp), so that both evaluate the same batches: private to
// src/train.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "mixp/data/dataset.h"
#include "mixp/train/run.h"

namespace mixp::train {

/// The test images in file order, normalized as in training, in batches of max(train_batch,
/// 256).
void for_each_image_eval_batch(const data::ImageSet& test, int64_t train_batch,
                               const std::function<void(const data::Batch&)>& visit);

/// The fingerprint of a training split of u8 tokens (as 8-byte ids, as runs have always
/// recorded it) or of image and label tensors.
DataFingerprint fingerprint_of_tokens(const std::string& path, const Tensor& tokens);
DataFingerprint fingerprint_of(const std::string& path, const std::vector<Tensor>& train_split);
/// Throws mixp::Error when `found` is not `expected`, naming both, and then `advice`.
void check_fingerprint(const DataFingerprint& expected, const DataFingerprint& found,
                       const std::string& advice);

/// Fashion-MNIST's pixel statistics, the normalization of every image run.
inline constexpr double kImageMean = 0.2860, kImageStd = 0.3530;

}  // namespace mixp::train
