// A mixed-precision training loop, as DESIGN.md writes it: autocast for the forward pass,
// dynamic loss scaling, gradient clipping after unscaling, fp32 master weights in the
// optimizer. The model is a two-layer perceptron; the data, points labelled by a random
// teacher network, is made here so that the example needs no files.
#include <mixp/amp/presets.h>
#include <mixp/mixp.h>

#include <cstdio>
#include <vector>

int main() {
  using namespace mixp;
  Philox rng(PhiloxState{/*seed=*/7, /*stream=*/0, /*offset=*/0});
  const int64_t n = 2048, features = 32, hidden = 64, classes = 4;
  const Tensor x = randn({n, features}, rng, 1.0, DType::f32, MemoryTag::data);
  Tensor y;
  {
    NoGradGuard no_grad;  // labels: the argmax of a random linear teacher
    y = ops::argmax(ops::linear(x, randn({classes, features}, rng)), 1);
  }

  // fp32 parameters; amp-fp16: forward in fp16 by op policy, dynamic loss scaling.
  const amp::Preset& preset = amp::preset("amp-fp16");
  std::vector<Tensor> params = preset.cast_parameters(
      {randn({hidden, features}, rng, 0.15, DType::f32, MemoryTag::parameter)
           .set_requires_grad(true),
       zeros({hidden}, DType::f32, MemoryTag::parameter).set_requires_grad(true),
       randn({classes, hidden}, rng, 0.1, DType::f32, MemoryTag::parameter).set_requires_grad(true),
       zeros({classes}, DType::f32, MemoryTag::parameter).set_requires_grad(true)});
  optim::AdamW opt(params, {.lr = 3e-3, .precision = preset.optimizer_precision});
  amp::GradScaler scaler = preset.make_scaler();

  const int64_t batch = 128;
  double loss_value = 0;
  for (int step = 0; step < 300; ++step) {
    const int64_t start = (step * batch) % n;
    const Tensor bx = x.slice(start, start + batch), by = y.slice(start, start + batch);
    Tensor loss;
    {
      amp::Autocast autocast = preset.autocast();
      const Tensor h = ops::relu(ops::linear(bx, params[0], params[1]));
      loss = ops::cross_entropy(ops::linear(h, params[2], params[3]), by);
    }
    scaler.scale(loss).backward();
    scaler.unscale(opt);
    optim::clip_grad_norm(params, 1.0);
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    loss_value = loss.item();
    if (step % 100 == 0)
      std::printf("step %3d  loss %.4f  scale %g\n", step, loss_value, scaler.get_scale());
  }

  NoGradGuard no_grad;
  const Tensor predicted = ops::argmax(
      ops::linear(ops::relu(ops::linear(x, params[0], params[1])), params[2], params[3]), 1);
  const std::vector<double> p = predicted.to_vector(), t = y.to_vector();
  int64_t correct = 0;
  for (size_t i = 0; i < p.size(); ++i) correct += p[i] == t[i];
  const double accuracy = double(correct) / double(n);
  std::printf("final loss %.4f, training accuracy %.3f\n", loss_value, accuracy);
  return accuracy >= 0.9 ? 0 : 1;
}
