// mixp/amp/fp8.h — FP8 training: scaled FP8 tensors, the scaling recipes, and the scope in
// which Linear layers and the matmuls of attention compute in FP8.
//
// Example (a training step with delayed scaling; the trainer does this under preset "fp8"):
//
//   using namespace mixp;
//   amp::Fp8State fp8({.scaling = amp::Fp8Scaling::delayed});    // HYBRID, history 1024
//   Tensor loss;
//   {
//     amp::Autocast bf16(DType::bf16);       // the rest of the model in bf16
//     amp::Fp8Autocast scope(fp8);           // Linear and attention matmuls in FP8
//     loss = ops::cross_entropy(model.forward(x), y);
//   }
//   loss.backward();                         // gradients quantized to E5M2, FP8 GEMMs again
//   opt.step();
//   fp8.update();                            // roll the amax histories, new scales
//
//   amp::Fp8Tensor q = amp::quantize(x2d, DType::e4m3, amp::Fp8Scaling::mxfp8);
//   Tensor back = q.dequantize();            // fp32, the values an FP8 tensor core multiplies
//
// What an FP8 GEMM computes here is what an FP8 tensor core computes: FP8 values widen exactly to
// bf16, a bf16 GEMM accumulates in fp32, and the fp32 result is multiplied by the product of the
// operands' scale_inv. The layout is always C[m, n] = A[m, k] B[n, k]^T with the scaling blocks of
// both operands along k, the reduction dimension, so each operand is quantized in the layout its
// GEMM reads. A tensor used along both of its dimensions (a weight in forward and backward)
// needs both layouts, TE's "rowwise" and "columnwise" copies: under per-tensor scaling the second
// is the first's codes transposed; the block scalings quantize the transposed tensor again.
//   per tensor (delayed, current, none): the widening is exact; the output is scaled by
//     scale_inv_a * scale_inv_b once.
//   mxfp8: each 32-block's E8M0 scale 2^e is applied while widening: fp8 * 2^e is exact in bf16
//     while it stays a bf16 normal number (bf16 has fp32's exponent range; only values below
//     2^-126 may round, as bf16 subnormals), so no output scaling is left.
//   per block with fp32 scales (1x128, 128x128): an fp32 scale is not a power of two, so it
//     cannot be folded into bf16 exactly. The product is split along k into 128-chunks: one bf16
//     GEMM per chunk on the exact widened values, each partial result multiplied by its rows' and
//     columns' scale_inv product and added in fp32 (DeepSeek-V3's promotion of partial sums).
//
// The recipes, pure functions below, with their edge cases:
//   delayed (Transformer Engine's DelayedScaling): each quantized tensor has an amax history of
//     H steps (default 1024). A step quantizes with the scale computed after the previous step
//     and records the amax it saw; update() pushes that amax into the history (dropping the
//     oldest), takes amax = the history's maximum ("max", default) or its newest entry
//     ("most_recent"), and sets scale = (fp8_max / amax) / 2^margin (margin 0 by default).
//     amax = 0 (nothing seen yet, or all zeros) or a non-finite amax keeps the previous scale;
//     a scale that overflows fp32 (a tiny amax) becomes FLT_MAX. The first step uses scale 1.
//   current: the same formula on the tensor's own amax, just in time; amax 0 or non-finite
//     gives scale 1.
//   mxfp8 (OCP Microscaling Formats v1.0): blocks of 32 along k; per block, a shared exponent e,
//     clamped to E8M0's range [-127, 127] and stored as the E8M0 code e + 127; elements are
//     V / 2^e rounded to the element format and saturated. The recipe's MxScaleRounding picks e:
//       floor (the OCP spec's suggestion): e = floor(log2(amax)) - emax_elem (E4M3: emax 8, E5M2:
//         emax 15). The block's largest element lands in [256, 512) for E4M3, so one above 448
//         saturates;
//       up (NVIDIA, "Recipes for Pre-training LLMs with MXFP8", arXiv 2506.08027): the smallest
//         e with amax <= fp8_max * 2^e, i.e. ceil(log2(amax / fp8_max)); nothing saturates, at
//         the cost of up to one binade of range below.
//     A block of zeros gets the smallest scale (code 0); a block with a NaN or an infinity gets
//     the NaN scale 0xFF, and decodes as NaN.
//   block_1x128, block_128x128: one fp32 scale per 1x128 (activations, gradients) or, for
//     block_128x128, per 128x128 tile of a weight; each is current scaling on its block.
//   none: scale 1 everywhere (the unscaled baseline).
// Formats by role: HYBRID (default) quantizes inputs and weights to E4M3 and gradients to E5M2;
// E4M3 uses E4M3 everywhere. Every conversion saturates: finite values beyond fp8_max go to
// ±fp8_max, NaN stays NaN.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixp/dtype.h"
#include "mixp/random.h"
#include "mixp/state_dict.h"
#include "mixp/tensor.h"

namespace mixp::amp {

enum class Fp8Scaling : uint8_t {
  delayed = 0,
  current = 1,
  mxfp8 = 2,
  block_1x128 = 3,
  block_128x128 = 4,
  none = 5,
};
enum class Fp8Format : uint8_t { hybrid = 0, e4m3 = 1 };
enum class Fp8Role : uint8_t { input = 0, weight = 1, gradient = 2 };
enum class AmaxAlgorithm : uint8_t { max = 0, most_recent = 1 };
/// How an MX block's power-of-two scale is rounded (see mxfp8 above).
enum class MxScaleRounding : uint8_t { floor = 0, up = 1 };
/// The rule runs used before the choice existed; a run config without the key reads as this.
inline constexpr MxScaleRounding kLegacyMxScaleRounding = MxScaleRounding::floor;
/// The rule a recipe uses unless told otherwise: up, which trained the small gpt on KJV within
/// 0.6% of amp-bf16 where floor came 2.0% behind (docs/amp.md, docs/results.md).
inline constexpr MxScaleRounding kDefaultMxScaleRounding = MxScaleRounding::up;

const char* name_of(Fp8Scaling scaling);
/// "floor" or "up".
const char* name_of(MxScaleRounding rounding);
/// The rule named "floor" or "up"; mixp::Error otherwise.
MxScaleRounding parse_mx_scale_rounding(std::string_view name);

/// The 4-bit formats (mixp/amp/fp4.h): E2M1 with NVFP4's two-level scales or MXFP4's E8M0, or
/// with no scaling at all (none: every value rounded to E2M1 as it is, the unscaled floor).
enum class Fp4Scaling : uint8_t { nvfp4 = 0, mxfp4 = 1, none = 2 };

/// A 4-bit training recipe for the Linear layers (NVIDIA, arXiv 2509.25149), each ingredient
/// switchable for ablations. Under it only nn::Linear layers compute in FP4, except the last
/// `bf16_tail` of them; attention, embeddings (and a head tied to one), norms and every other
/// op stay in bf16, and masters, weight gradients and optimizer state in fp32.
///   forward:  y = q(x) q(W)^T, x in 1 x block blocks, W in block x block tiles (square_weights)
///             or 1 x block blocks along in; both rounded to nearest even;
///   dgrad:    dx = q(dy) q(W^T)^T, dy along out; with square tiles q(W^T) is q(W) transposed,
///             the same values as forward; without, W^T is quantized again along out;
///   wgrad:    dW = q(H dy^T) q(H x^T)^T along the rows (tokens), H the 16-point random
///             Hadamard transform (hadamard), both zero-padded to a multiple of 16 rows;
///   dy is rounded stochastically (stochastic_gradients) in both GEMMs, else to nearest even.
struct Fp4Recipe {
  Fp4Scaling scaling = Fp4Scaling::nvfp4;
  bool square_weights = true;
  bool hadamard = true;
  bool stochastic_gradients = true;
  /// The fraction of the Linear layers, the last in model order, that stay in bf16: the
  /// ceiling of bf16_tail x their count. 0 puts every Linear layer in FP4.
  double bf16_tail = 0.15;
  MxScaleRounding mx_scale_rounding = kDefaultMxScaleRounding;  ///< mxfp4 only
};

struct Fp8Recipe {
  Fp8Scaling scaling = Fp8Scaling::delayed;
  Fp8Format format = Fp8Format::hybrid;
  int64_t amax_history_len = 1024;  ///< delayed scaling only; at least 1
  AmaxAlgorithm amax_algorithm = AmaxAlgorithm::max;
  int margin = 0;  ///< the scale leaves 2^margin of headroom below fp8_max
  MxScaleRounding mx_scale_rounding = kDefaultMxScaleRounding;  ///< mxfp8 only
  /// Set: the Linear layers compute in FP4 by this recipe instead, and attention in bf16; the
  /// FP8 fields above are unused.
  std::optional<Fp4Recipe> fp4 = std::nullopt;
  /// With fp4: each Linear layer's format (FP4, FP8 or bf16) adapts to its statistics
  /// (mixp/amp/adaptive.h); every eligible layer starts in FP4, or in FP8 when
  /// adaptive_from_fp8.
  bool adaptive = false;
  bool adaptive_from_fp8 = false;
};

/// The storage dtype of a tensor of `role` under `format`: e4m3 or e5m2.
DType fp8_dtype(Fp8Format format, Fp8Role role);
/// The largest finite value of an fp8 dtype: 448 (e4m3), 57344 (e5m2).
float fp8_max(DType fp8);

// ---- the recipes: pure functions ----

/// (fp8_max / amax) / 2^margin, or `previous` when amax is 0, negative or not finite; FLT_MAX
/// when the quotient overflows fp32. Never 0, inf or NaN when `previous` is none of them.
float scale_from_amax(float amax, float fp8_max, int margin, float previous);
/// The amax a delayed-scaling step uses: the maximum of `history` (AmaxAlgorithm::max) or its
/// last entry (most_recent); NaN and infinities propagate; 0 for an empty history.
float history_amax(std::span<const float> history, AmaxAlgorithm algorithm);
/// Delayed scaling: scale_from_amax(history_amax(history), ...).
float delayed_scale(std::span<const float> history, AmaxAlgorithm algorithm, float fp8_max,
                    int margin, float previous);
/// Current scaling: scale_from_amax(amax, fp8_max, margin, 1).
float current_scale(float amax, float fp8_max, int margin = 0);

/// emax of an MX element format: 8 for e4m3, 15 for e5m2.
int mx_emax(DType element);
/// The E8M0 code of a block's shared scale, from its amax (see the rules above): 0xFF for a
/// NaN or infinite amax, code 0 for amax 0, else clamp(e, -127, 127) + 127 with e by `rounding`:
/// floor(log2(amax)) - emax, or (up) the smallest e with amax <= fp8_max(element) * 2^e.
uint8_t mx_scale_code(float amax, DType element, MxScaleRounding rounding = MxScaleRounding::floor);
/// The value of an E8M0 code: 2^(code - 127); NaN for 0xFF.
float e8m0_value(uint8_t code);

// ---- the scaled FP8 tensor ----

/// A 2-D [rows, cols] (or 3-D [batch, rows, cols]) FP8 tensor with its scaling, blocks along the
/// last dimension (the reduction dimension of the GEMM that reads it).
struct Fp8Tensor {
  Tensor data;  ///< e4m3 or e5m2 codes
  Fp8Scaling scaling = Fp8Scaling::none;
  float scale = 1.0f;      ///< per tensor: data = fp8(x * scale)
  float scale_inv = 1.0f;  ///< 1 / scale
  float amax = 0.0f;       ///< max |x| of the source (NaN if it held a NaN)
  /// mxfp8: u8 E8M0 codes [rows, ceil(cols / 32)] (per batch matrix, stacked);
  /// block_*: f32 scale_inv [ceil(rows / block_rows), ceil(cols / 128)] per batch matrix.
  Tensor block_scales;
  int64_t block_rows = 1;  ///< 1, or 128 for a 128x128-tiled weight
  int64_t block_cols = 0;  ///< 32 (mxfp8), 128 (block_*), 0 per tensor

  /// The values this tensor stands for, as f32 of data's shape.
  Tensor dequantize() const;
};

/// Quantizes x (f32 or bf16, 2-D or 3-D, contiguous) to `fp8`. Per-tensor scalings use `scale`
/// (given for delayed and none; computed from x for current, when `scale` is ignored);
/// block_128x128 tiles by 128x128 (use it for weights) and block_1x128 by 1x128; mxfp8 rounds
/// its block scales by `mx_rounding`. The fast and the reference kernel give the same bits; the
/// reference is used under reference_mode().
Fp8Tensor quantize(const Tensor& x, DType fp8, Fp8Scaling scaling, float scale = 1.0f,
                   MxScaleRounding mx_rounding = kDefaultMxScaleRounding);

/// C[b] = A[b] B[b]^T in fp32 from two quantized operands with the same k (their last
/// dimension) and the same scaling kind; see the header comment for how scales are applied.
/// A is [m, k] or [batch, m, k]; B is [n, k] or [batch, n, k]; C is [m, n] or [batch, m, n].
Tensor fp8_gemm(const Fp8Tensor& a, const Fp8Tensor& b);

// ---- the training state and the scope ----

/// The amax history and scale of one quantized tensor (one role of one GEMM site).
struct Fp8Meta {
  Fp8Role role = Fp8Role::input;
  std::vector<float> history;  ///< oldest first, at most amax_history_len entries
  float amax = 0.0f;           ///< the running max over this step's quantizations
  float scale = 1.0f;
  /// Takes in one quantization's amax (NaN and infinities stick until update()).
  void record(float observed);
  /// End of step: push amax into the history, compute the next scale, reset amax.
  void update(const Fp8Recipe& recipe, DType fp8);
};

/// The FP8 GEMM sites of a model, numbered in the order a forward pass reaches them (the n-th
/// FP8 linear or attention call of every forward is site n), with one Fp8Meta per quantized
/// tensor, and the per-step cache of quantized weights. The model must reach the same sites in
/// the same order every step (mixp::Error otherwise).
class Fp8State {
 public:
  explicit Fp8State(Fp8Recipe recipe = {});
  const Fp8Recipe& recipe() const { return recipe_; }

  /// After each optimizer step: every meta's update(), and the weight cache emptied.
  void update();
  /// Number of sites seen so far.
  size_t sites() const { return sites_.size(); }
  /// The metas of site i.
  std::vector<Fp8Meta>& metas(size_t site);

  /// Every meta as named f32 tensors ("fp8/<site>/<k>/history" and "fp8/<site>/<k>/scale_amax"
  /// = [scale, amax]) for a checkpoint, and back; under an FP4 recipe also
  /// "fp8/fp4/hadamard_signs" (16 f32), which load_state makes this state's signs, so that a
  /// resumed run transforms as the run that wrote it. load_state checks the names and shapes.
  std::vector<std::pair<std::string, Tensor>> state() const;
  void load_state(const std::map<std::string, Tensor>& tensors);
  /// state() as a StateDict, the "fp8/" prefix left to the caller ("<site>/<k>/history", ...).
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);

  struct Site {
    std::string kind;  ///< "linear" or "attention"
    std::vector<Fp8Meta> metas;
  };
  /// Site `index` (created on first use with `roles`); mixp::Error when it exists with another
  /// kind. Used by the FP8 ops.
  std::shared_ptr<Site> site(size_t index, const std::string& kind, std::span<const Fp8Role> roles);

  // ---- FP4 recipes (recipe().fp4) ----

  /// A Linear layer under an FP4 recipe: its name, its weight, and whether it computes in FP4.
  struct Fp4Layer {
    std::string name;
    const TensorImpl* weight = nullptr;
    bool fp4 = false;
  };
  /// The model's Linear layers in model order (set by train::make_low_precision_state, from
  /// nn::Module's named_modules(), with the recipe's bf16_tail applied).
  void set_fp4_layers(std::vector<Fp4Layer> layers);
  const std::vector<Fp4Layer>& fp4_layers() const { return fp4_layers_; }
  /// The index in fp4_layers() of the layer whose weight is `weight` and that computes in FP4;
  /// nothing for any other tensor.
  std::optional<size_t> fp4_layer_of(const Tensor& weight) const;
  /// The seed of the Hadamard signs and of stochastic rounding; new signs from it.
  void set_seed(uint64_t seed);
  /// The 16 signs (+1, -1) of the random Hadamard transform, drawn from the seed.
  const std::array<float, 16>& hadamard_signs() const { return hadamard_signs_; }
  /// Where the next backward's stochastic rounding draws: the step and the micro-batch (numbered
  /// over all ranks), so that a micro-batch draws the same words in any split of a step between
  /// processes, and a resumed run the same words as an uninterrupted one.
  void set_rounding_position(int64_t step, int64_t micro_batch);
  /// The stream of stochastic rounding for FP4 layer `layer`'s gradient in GEMM `gemm` (0: dgrad,
  /// 1: wgrad) at the current position.
  PhiloxState gradient_rounding(size_t layer, int gemm) const;

  /// Linear FLOPs of training steps by the format they ran in (FP4, FP8, bf16; 2 a
  /// multiply-add forward and 4 backward), counted by the linears under an FP4 recipe.
  void count_linear_flops(int format, double flops) { linear_flops_.at(size_t(format)) += flops; }
  const std::array<double, 3>& linear_flops() const { return linear_flops_; }

  /// More state the recipe needs (adaptive precision, mixp/amp/adaptive.h): told of the
  /// position and the step's end, saved and loaded with this state.
  class Extension {
   public:
    virtual ~Extension() = default;
    virtual void begin(int64_t step, int64_t micro_batch) = 0;
    virtual void update() = 0;
    virtual void save(StateDict& state) const = 0;
    virtual void load(const StateDict& state) = 0;
  };
  void set_extension(std::unique_ptr<Extension> extension) { extension_ = std::move(extension); }
  Extension* extension() const { return extension_.get(); }

  /// The quantization of a 2-D parameter for this step with `meta`'s scale, made once per
  /// (parameter, version) until update(); its amax is recorded into `meta` once per step when
  /// `record`. Used by the FP8 linear.
  Fp8Tensor cached_weight(const Tensor& weight, Fp8Meta& meta, bool record);

 private:
  struct CachedWeight {
    std::weak_ptr<TensorImpl> source;
    uint64_t version = 0;
    Fp8Tensor q;
    bool recorded = false;  // its amax went into the meta this step
  };
  Fp8Recipe recipe_;
  std::vector<std::shared_ptr<Site>> sites_;
  std::vector<Fp4Layer> fp4_layers_;
  std::map<const TensorImpl*, size_t> fp4_index_;
  uint64_t seed_ = 0;
  std::array<float, 16> hadamard_signs_{};
  int64_t rounding_step_ = 0, rounding_micro_batch_ = 0;
  std::array<double, 3> linear_flops_{};
  std::unique_ptr<Extension> extension_;
  std::map<const TensorImpl*, CachedWeight> weights_;
};

/// A thread-local RAII scope: while the innermost enabled one lives, ops::linear and
/// ops::scaled_dot_product_attention compute their products in FP8 with `state`'s recipe and
/// record into its metas. Scopes nest; an inner one replaces the outer's state. Sites are counted
/// from 0 at the entry of every outermost scope. Autocast (bf16) may be active too: outputs then
/// take its dtype. Backward, and op bodies, run with FP8 off.
class Fp8Autocast {
 public:
  explicit Fp8Autocast(Fp8State& state, bool enabled = true);
  ~Fp8Autocast();
  Fp8Autocast(const Fp8Autocast&) = delete;
  Fp8Autocast& operator=(const Fp8Autocast&) = delete;

 private:
  Fp8State* previous_state_;
  bool previous_enabled_;
  bool enabled_;
};

/// The state of the innermost enabled scope when FP8 is on for ops on this thread, else null.
Fp8State* fp8_active();
/// The next site number of the current outermost scope (and advances it).
size_t fp8_next_site();

}  // namespace mixp::amp
