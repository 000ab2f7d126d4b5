// Small inline-SVG charts for the HTML report: axes with readable ticks
// (linear, log10, or log2 for message sizes), lines, markers and bars. The
// report stays one self-contained file: no script library, no fetches.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace rdmadiag::exporters {

enum class AxisScale { linear, log10, log2 };

struct Axis {
  double lo = 0, hi = 1;
  AxisScale scale = AxisScale::linear;
  std::string label;
};

class SvgPlot {
 public:
  SvgPlot(int width, int height, Axis x, Axis y, std::string title);
  void line(const std::vector<std::pair<double, double>>& pts, const std::string& color, const std::string& name = "",
            double width = 1.5);
  // Marker shapes: "circle", "triangle", "cross", "square", "diamond".
  void markers(const std::vector<std::pair<double, double>>& pts, const std::string& color, const std::string& shape,
               const std::string& name, double size = 4);
  // Vertical bars from y=0 (or the axis bottom) over [x0, x1) each.
  void bars(const std::vector<std::pair<std::pair<double, double>, double>>& spans, const std::string& color,
            const std::string& name = "");
  std::string svg() const;

 private:
  double px(double x) const;
  double py(double y) const;
  int w_, h_;
  Axis x_, y_;
  std::string title_;
  std::string body_;
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> legend_;  // name, (color, shape)
};

std::string html_escape(const std::string& s);
// 1536 -> "1.5K", 8388608 -> "8M" (binary units, for message sizes).
std::string size_label(double bytes);
std::string short_number(double v);
// 1234567 -> "1.2 MB" (decimal units, as link and disk sizes are written).
std::string human_bytes(double bytes);

}  // namespace rdmadiag::exporters
