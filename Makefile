# The two commands of the README, and a few more for developers.
#   make run    install missing dependencies, build (Release), run the main job
#   make test   install missing dependencies, build, run every test
#   make formats  the table of number formats (the main job before the trainer)
.PHONY: run formats test build deps asan bench format clean

BUILD := build/release

deps:
	@scripts/install-deps.sh

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release

# The main job: the cnn on Fashion-MNIST for one epoch under three precisions (a few minutes on
# 2 cores); runs/compare holds each run folder, compare.json and compare.svg.
run: build
	$(BUILD)/tools/mixp/mixp compare --model cnn --precisions fp32,amp-bf16,amp-fp16 --epochs 1 \
	  --out runs/compare

formats: build
	$(BUILD)/tools/mixp/mixp formats

test: build
	ctest --preset release

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer (Debug).
asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan
	ctest --preset asan

bench: build
	$(BUILD)/tools/mixp/mixp bench convert

format:
	@clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf build
