// Just enough PNG decoding to check a browser screenshot: 8-bit grey, grey +
// alpha, RGB and RGBA images, not interlaced (what Chromium writes).
#ifndef REMAT_TESTS_VISUALIZE_BROWSER_PNG_READER_H_
#define REMAT_TESTS_VISUALIZE_BROWSER_PNG_READER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace remat::testing {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgba;  // width * height * 4, rows top to bottom
};

// Decodes `png` (the file's bytes). Returns "" on success, else what is wrong.
std::string DecodePng(const std::string& png, Image* out);

struct PixelStats {
  int64_t pixels = 0;
  int64_t ink = 0;      // pixels that are not (near) white
  int64_t colours = 0;  // distinct colours at 4 bits per channel
};
PixelStats MeasurePixels(const Image& image);

}  // namespace remat::testing

#endif  // REMAT_TESTS_VISUALIZE_BROWSER_PNG_READER_H_
