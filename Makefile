# The two commands of the README, and a few more for developers.
#   make run    install missing dependencies, build (Release), run the main job
#   make test   install missing dependencies, build, run every test
.PHONY: run test build deps asan bench format clean

BUILD := build/release

deps:
	@scripts/install-deps.sh

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release

run: build
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
