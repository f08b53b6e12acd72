#include "png_reader.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <set>

namespace remat::testing {
namespace {

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(s[at + 3])};
}

int Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

// Undoes the per-row filters in place; `raw` holds (1 + stride) bytes a row.
std::string Unfilter(std::vector<uint8_t>& raw, int height, size_t stride, int bpp,
                     std::vector<uint8_t>* pixels) {
  pixels->assign(stride * height, 0);
  for (int y = 0; y < height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* out = &(*pixels)[y * stride];
    const uint8_t* up = y > 0 ? &(*pixels)[(y - 1) * stride] : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<size_t>(bpp) ? out[x - bpp] : 0;
      const int b = up ? up[x] : 0;
      const int c = up && x >= static_cast<size_t>(bpp) ? up[x - bpp] : 0;
      int v = in[x];
      switch (filter) {
        case 0:
          break;
        case 1:
          v += a;
          break;
        case 2:
          v += b;
          break;
        case 3:
          v += (a + b) / 2;
          break;
        case 4:
          v += Paeth(a, b, c);
          break;
        default:
          return "unknown filter type " + std::to_string(filter) + " in row " + std::to_string(y);
      }
      out[x] = static_cast<uint8_t>(v);
    }
  }
  return "";
}

}  // namespace

std::string DecodePng(const std::string& png, Image* out) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (png.size() < 8 || std::memcmp(png.data(), kSignature, 8) != 0) return "not a PNG file";
  size_t at = 8;
  int width = 0, height = 0, channels = 0;
  std::string idat;
  bool ended = false;
  while (at + 12 <= png.size() && !ended) {
    const uint32_t length = BigEndian32(png, at);
    const std::string type = png.substr(at + 4, 4);
    if (at + 12 + length > png.size()) return "truncated " + type + " chunk";
    const size_t data = at + 8;
    const uint32_t crc = BigEndian32(png, data + length);
    if (crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(png.data() + at + 4),
              length + 4) != crc) {
      return "bad CRC in " + type + " chunk";
    }
    if (type == "IHDR") {
      if (length != 13) return "bad IHDR";
      width = static_cast<int>(BigEndian32(png, data));
      height = static_cast<int>(BigEndian32(png, data + 4));
      const int depth = static_cast<uint8_t>(png[data + 8]);
      const int colour = static_cast<uint8_t>(png[data + 9]);
      const int interlace = static_cast<uint8_t>(png[data + 12]);
      if (depth != 8) return "bit depth " + std::to_string(depth) + " not supported";
      if (interlace != 0) return "interlaced PNG not supported";
      switch (colour) {
        case 0:
          channels = 1;
          break;
        case 2:
          channels = 3;
          break;
        case 4:
          channels = 2;
          break;
        case 6:
          channels = 4;
          break;
        default:
          return "colour type " + std::to_string(colour) + " not supported";
      }
      if (width <= 0 || height <= 0 || width > 20000 || height > 20000) return "bad image size";
    } else if (type == "IDAT") {
      idat.append(png, data, length);
    } else if (type == "IEND") {
      ended = true;
    }
    at += 12 + length;
  }
  if (channels == 0) return "no IHDR chunk";
  if (!ended) return "no IEND chunk";
  const size_t stride = static_cast<size_t>(width) * channels;
  std::vector<uint8_t> raw((stride + 1) * height);
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_size != raw.size()) {
    return "image data does not inflate to " + std::to_string(raw.size()) + " bytes";
  }
  std::vector<uint8_t> pixels;
  const std::string err = Unfilter(raw, height, stride, channels, &pixels);
  if (!err.empty()) return err;
  out->width = width;
  out->height = height;
  out->rgba.resize(static_cast<size_t>(width) * height * 4);
  for (size_t p = 0; p < static_cast<size_t>(width) * height; ++p) {
    const uint8_t* s = &pixels[p * channels];
    uint8_t* d = &out->rgba[p * 4];
    const bool grey = channels <= 2;
    d[0] = s[0];
    d[1] = grey ? s[0] : s[1];
    d[2] = grey ? s[0] : s[2];
    d[3] = channels == 2 ? s[1] : channels == 4 ? s[3] : 255;
  }
  return "";
}

PixelStats MeasurePixels(const Image& image) {
  PixelStats s;
  std::set<int> colours;
  for (size_t p = 0; p + 3 < image.rgba.size(); p += 4) {
    const uint8_t r = image.rgba[p], g = image.rgba[p + 1], b = image.rgba[p + 2];
    ++s.pixels;
    if (r < 240 || g < 240 || b < 240) ++s.ink;
    colours.insert((r >> 4) << 8 | (g >> 4) << 4 | (b >> 4));
  }
  s.colours = static_cast<int64_t>(colours.size());
  return s;
}

}  // namespace remat::testing
