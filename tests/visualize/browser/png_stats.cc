// png_stats [--min-ink FRACTION] [--min-colours N] [--size WxH] FILE.png
// Prints the image's size, its share of non-white pixels and its number of
// colours; exits 1 if a minimum is not met (a blank or broken screenshot),
// 2 if the file is not a readable PNG.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "png_reader.h"

int main(int argc, char** argv) {
  double min_ink = 0;
  long min_colours = 0;
  std::string size, path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--min-ink" && i + 1 < argc) {
      min_ink = std::atof(argv[++i]);
    } else if (a == "--min-colours" && i + 1 < argc) {
      min_colours = std::atol(argv[++i]);
    } else if (a == "--size" && i + 1 < argc) {
      size = argv[++i];
    } else if (path.empty() && !a.empty() && a[0] != '-') {
      path = a;
    } else {
      std::fprintf(stderr, "usage: png_stats [--min-ink F] [--min-colours N] [--size WxH] FILE\n");
      return 2;
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "png_stats: cannot read %s\n", path.c_str());
    return 2;
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  remat::testing::Image image;
  const std::string err = remat::testing::DecodePng(bytes.str(), &image);
  if (!err.empty()) {
    std::fprintf(stderr, "png_stats: %s: %s\n", path.c_str(), err.c_str());
    return 2;
  }
  const remat::testing::PixelStats s = remat::testing::MeasurePixels(image);
  const double ink = static_cast<double>(s.ink) / static_cast<double>(s.pixels);
  std::printf("%s: %dx%d, %.1f%% non-white, %lld colours\n", path.c_str(), image.width,
              image.height, 100.0 * ink, static_cast<long long>(s.colours));
  bool ok = true;
  if (ink < min_ink) {
    std::fprintf(stderr, "png_stats: only %.2f%% of the pixels are not white (want %.2f%%)\n",
                 100.0 * ink, 100.0 * min_ink);
    ok = false;
  }
  if (s.colours < min_colours) {
    std::fprintf(stderr, "png_stats: %lld colours (want %ld)\n", static_cast<long long>(s.colours),
                 min_colours);
    ok = false;
  }
  if (!size.empty() && size != std::to_string(image.width) + "x" + std::to_string(image.height)) {
    std::fprintf(stderr, "png_stats: size %dx%d, want %s\n", image.width, image.height,
                 size.c_str());
    ok = false;
  }
  return ok ? 0 : 1;
}
