#include "png_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>

namespace remat::testing {
namespace {

void PutBigEndian32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xff);
}

void Chunk(std::string& png, const std::string& type, const std::string& data) {
  PutBigEndian32(png, static_cast<uint32_t>(data.size()));
  const std::string body = type + data;
  png += body;
  PutBigEndian32(
      png, crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(body.data()), body.size()));
}

int Predict(int filter, int a, int b, int c) {
  switch (filter) {
    case 1:
      return a;
    case 2:
      return b;
    case 3:
      return (a + b) / 2;
    case 4: {
      const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
      return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
    }
  }
  return 0;
}

// An 8-bit PNG of `pixels` (channels per pixel by colour type), row y
// filtered with filter y % 5.
std::string EncodePng(int w, int h, int colour, int channels, const std::vector<uint8_t>& pixels) {
  const size_t stride = static_cast<size_t>(w) * channels;
  std::string raw;
  for (int y = 0; y < h; ++y) {
    const int filter = y % 5;
    raw += static_cast<char>(filter);
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<size_t>(channels) ? pixels[y * stride + x - channels] : 0;
      const int b = y > 0 ? pixels[(y - 1) * stride + x] : 0;
      const int c =
          y > 0 && x >= static_cast<size_t>(channels) ? pixels[(y - 1) * stride + x - channels] : 0;
      raw += static_cast<char>((pixels[y * stride + x] - Predict(filter, a, b, c)) & 0xff);
    }
  }
  std::string z(compressBound(raw.size()), '\0');
  uLongf z_size = z.size();
  compress(reinterpret_cast<Bytef*>(z.data()), &z_size, reinterpret_cast<const Bytef*>(raw.data()),
           raw.size());
  z.resize(z_size);
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  PutBigEndian32(ihdr, w);
  PutBigEndian32(ihdr, h);
  ihdr += std::string{8, static_cast<char>(colour), 0, 0, 0};
  Chunk(png, "IHDR", ihdr);
  Chunk(png, "IDAT", z.substr(0, z.size() / 2));  // split: IDATs concatenate
  Chunk(png, "IDAT", z.substr(z.size() / 2));
  Chunk(png, "IEND", "");
  return png;
}

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 37 + i / 7 * 11) & 0xff);
  return v;
}

TEST(DecodePng, UndoesEveryFilterForRgba) {
  const int w = 7, h = 10;
  const std::vector<uint8_t> pixels = Pattern(static_cast<size_t>(w) * h * 4);
  Image image;
  ASSERT_EQ(DecodePng(EncodePng(w, h, 6, 4, pixels), &image), "");
  EXPECT_EQ(image.width, w);
  EXPECT_EQ(image.height, h);
  EXPECT_EQ(image.rgba, pixels);
}

TEST(DecodePng, ExpandsRgbAndGrey) {
  const int w = 5, h = 6;
  const std::vector<uint8_t> rgb = Pattern(static_cast<size_t>(w) * h * 3);
  Image image;
  ASSERT_EQ(DecodePng(EncodePng(w, h, 2, 3, rgb), &image), "");
  EXPECT_EQ(image.rgba[4 * 7 + 0], rgb[3 * 7 + 0]);
  EXPECT_EQ(image.rgba[4 * 7 + 2], rgb[3 * 7 + 2]);
  EXPECT_EQ(image.rgba[4 * 7 + 3], 255);
  const std::vector<uint8_t> grey = Pattern(static_cast<size_t>(w) * h);
  ASSERT_EQ(DecodePng(EncodePng(w, h, 0, 1, grey), &image), "");
  EXPECT_EQ(image.rgba[4 * 9 + 1], grey[9]);
}

TEST(DecodePng, RejectsBrokenFiles) {
  Image image;
  EXPECT_EQ(DecodePng("hello", &image), "not a PNG file");
  std::string png = EncodePng(3, 3, 6, 4, Pattern(36));
  png[40] ^= 1;  // inside IDAT: the CRC no longer matches
  EXPECT_NE(DecodePng(png, &image).find("bad CRC"), std::string::npos);
  EXPECT_NE(DecodePng(EncodePng(3, 3, 6, 4, Pattern(36)).substr(0, 50), &image), "");
}

TEST(MeasurePixels, CountsInkAndColours) {
  Image white{2, 2, std::vector<uint8_t>(16, 255)};
  PixelStats s = MeasurePixels(white);
  EXPECT_EQ(s.pixels, 4);
  EXPECT_EQ(s.ink, 0);
  EXPECT_EQ(s.colours, 1);
  white.rgba[0] = 20;  // one reddish-dark pixel
  s = MeasurePixels(white);
  EXPECT_EQ(s.ink, 1);
  EXPECT_EQ(s.colours, 2);
}

}  // namespace
}  // namespace remat::testing
