#include "exporters/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace rdmadiag::exporters {

namespace {

constexpr int kLeft = 80, kRight = 20, kTop = 30, kBottom = 45;

std::string f1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

double transform(double v, AxisScale s) {
  if (s == AxisScale::linear) return v;
  v = std::max(v, 1e-12);
  return s == AxisScale::log10 ? std::log10(v) : std::log2(v);
}

std::vector<double> ticks(const Axis& a) {
  std::vector<double> t;
  if (a.scale == AxisScale::linear) {
    const double span = a.hi - a.lo;
    if (!(span > 0)) return {a.lo};
    const double raw = span / 6;
    const double mag = std::pow(10, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (raw <= m * mag) {
        step = m * mag;
        break;
      }
    for (double v = std::ceil(a.lo / step) * step; v <= a.hi + step * 1e-9; v += step) t.push_back(v);
  } else {
    const double base = a.scale == AxisScale::log10 ? 10 : 2;
    const int lo = static_cast<int>(std::ceil(transform(a.lo, a.scale) - 1e-9));
    const int hi = static_cast<int>(std::floor(transform(a.hi, a.scale) + 1e-9));
    const int every = a.scale == AxisScale::log2 ? std::max(1, (hi - lo + 11) / 12) : 1;
    for (int e = lo; e <= hi; e += every) t.push_back(std::pow(base, e));
  }
  return t;
}

std::string marker(const std::string& shape, double x, double y, double s, const std::string& color) {
  const std::string X = f1(x), Y = f1(y);
  if (shape == "triangle")
    return "<path d=\"M" + f1(x) + " " + f1(y - s) + " L" + f1(x - s) + " " + f1(y + s) + " L" + f1(x + s) + " " + f1(y + s) +
           " Z\" fill=\"" + color + "\"/>";
  if (shape == "cross")
    return "<path d=\"M" + f1(x - s) + " " + f1(y - s) + " L" + f1(x + s) + " " + f1(y + s) + " M" + f1(x - s) + " " +
           f1(y + s) + " L" + f1(x + s) + " " + f1(y - s) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>";
  if (shape == "square")
    return "<rect x=\"" + f1(x - s) + "\" y=\"" + f1(y - s) + "\" width=\"" + f1(2 * s) + "\" height=\"" + f1(2 * s) +
           "\" fill=\"" + color + "\"/>";
  if (shape == "diamond")
    return "<path d=\"M" + f1(x) + " " + f1(y - s) + " L" + f1(x + s) + " " + f1(y) + " L" + f1(x) + " " + f1(y + s) + " L" +
           f1(x - s) + " " + f1(y) + " Z\" fill=\"" + color + "\"/>";
  return "<circle cx=\"" + X + "\" cy=\"" + Y + "\" r=\"" + f1(s) + "\" fill=\"" + color + "\"/>";
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string size_label(double bytes) {
  const char* units[] = {"", "K", "M", "G"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes == std::floor(bytes) ? "%.0f%s" : "%.1f%s", bytes, units[u]);
  return buf;
}

std::string short_number(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (v == std::floor(v) && a < 1e10) std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a != 0 && (a >= 1e6 || a < 1e-3)) std::snprintf(buf, sizeof buf, "%.3g", v);
  else if (a >= 100 || v == std::floor(v)) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof out, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return out;
}

SvgPlot::SvgPlot(int width, int height, Axis x, Axis y, std::string title)
    : w_(width), h_(height), x_(std::move(x)), y_(std::move(y)), title_(std::move(title)) {
  if (!(x_.hi > x_.lo)) x_.hi = x_.lo + 1;
  if (!(y_.hi > y_.lo)) y_.hi = y_.lo + 1;
}

double SvgPlot::px(double x) const {
  const double a = transform(x_.lo, x_.scale), b = transform(x_.hi, x_.scale);
  return kLeft + (transform(x, x_.scale) - a) / (b - a) * (w_ - kLeft - kRight);
}

double SvgPlot::py(double y) const {
  const double a = transform(y_.lo, y_.scale), b = transform(y_.hi, y_.scale);
  return h_ - kBottom - (transform(y, y_.scale) - a) / (b - a) * (h_ - kTop - kBottom);
}

void SvgPlot::line(const std::vector<std::pair<double, double>>& pts, const std::string& color, const std::string& name,
                   double width) {
  if (pts.empty()) return;
  std::string d;
  for (const auto& [x, y] : pts) d += (d.empty() ? "M" : " L") + f1(px(x)) + " " + f1(py(y));
  body_ += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" + f1(width) + "\"/>\n";
  if (!name.empty()) legend_.push_back({name, {color, "line"}});
}

void SvgPlot::markers(const std::vector<std::pair<double, double>>& pts, const std::string& color, const std::string& shape,
                      const std::string& name, double size) {
  if (pts.empty()) return;
  body_ += "<g>";
  for (const auto& [x, y] : pts) body_ += marker(shape, px(x), py(y), size, color);
  body_ += "</g>\n";
  if (!name.empty()) legend_.push_back({name + " (" + std::to_string(pts.size()) + ")", {color, shape}});
}

void SvgPlot::bars(const std::vector<std::pair<std::pair<double, double>, double>>& spans, const std::string& color,
                   const std::string& name) {
  const double base = py(y_.scale == AxisScale::linear ? std::max(0.0, y_.lo) : y_.lo);
  for (const auto& [span, v] : spans) {
    if (v <= 0) continue;
    const double x0 = px(span.first), x1 = px(span.second), top = py(v);
    body_ += "<rect x=\"" + f1(x0 + 0.5) + "\" y=\"" + f1(top) + "\" width=\"" + f1(std::max(1.0, x1 - x0 - 1)) +
             "\" height=\"" + f1(std::max(0.0, base - top)) + "\" fill=\"" + color + "\"><title>" +
             html_escape(short_number(span.first) + "-" + short_number(span.second) + ": " + short_number(v)) + "</title></rect>";
  }
  body_ += "\n";
  if (!name.empty()) legend_.push_back({name, {color, "square"}});
}

std::string SvgPlot::svg() const {
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w_) + "\" height=\"" +
                  std::to_string(h_) + "\" viewBox=\"0 0 " + std::to_string(w_) + " " + std::to_string(h_) +
                  "\" class=\"plot\" font-family=\"sans-serif\" font-size=\"11\">\n";
  s += "<text x=\"" + std::to_string(w_ / 2) + "\" y=\"16\" text-anchor=\"middle\" font-weight=\"bold\" font-size=\"13\">" +
       html_escape(title_) + "</text>\n";
  const double x0 = kLeft, x1 = w_ - kRight, y0 = kTop, y1 = h_ - kBottom;
  s += "<rect x=\"" + f1(x0) + "\" y=\"" + f1(y0) + "\" width=\"" + f1(x1 - x0) + "\" height=\"" + f1(y1 - y0) +
       "\" fill=\"#fbfbfd\" stroke=\"#888\"/>\n";
  for (double t : ticks(x_)) {
    const double x = px(t);
    if (x < x0 - 0.5 || x > x1 + 0.5) continue;
    s += "<line x1=\"" + f1(x) + "\" y1=\"" + f1(y0) + "\" x2=\"" + f1(x) + "\" y2=\"" + f1(y1) + "\" stroke=\"#e2e2e8\"/>";
    s += "<text x=\"" + f1(x) + "\" y=\"" + f1(y1 + 14) + "\" text-anchor=\"middle\">" +
         html_escape(x_.scale == AxisScale::log2 ? size_label(t) : short_number(t)) + "</text>\n";
  }
  for (double t : ticks(y_)) {
    const double y = py(t);
    if (y < y0 - 0.5 || y > y1 + 0.5) continue;
    s += "<line x1=\"" + f1(x0) + "\" y1=\"" + f1(y) + "\" x2=\"" + f1(x1) + "\" y2=\"" + f1(y) + "\" stroke=\"#e2e2e8\"/>";
    s += "<text x=\"" + f1(x0 - 4) + "\" y=\"" + f1(y + 4) + "\" text-anchor=\"end\">" +
         html_escape(y_.scale == AxisScale::log2 ? size_label(t) : short_number(t)) + "</text>\n";
  }
  s += "<text x=\"" + f1((x0 + x1) / 2) + "\" y=\"" + std::to_string(h_ - 8) + "\" text-anchor=\"middle\">" +
       html_escape(x_.label) + "</text>\n";
  s += "<text transform=\"translate(14," + f1((y0 + y1) / 2) + ") rotate(-90)\" text-anchor=\"middle\">" + html_escape(y_.label) +
       "</text>\n";
  s += "<svg x=\"" + f1(x0) + "\" y=\"" + f1(y0) + "\" width=\"" + f1(x1 - x0) + "\" height=\"" + f1(y1 - y0) +
       "\" viewBox=\"" + f1(x0) + " " + f1(y0) + " " + f1(x1 - x0) + " " + f1(y1 - y0) + "\" overflow=\"hidden\">\n";
  s += body_;
  s += "</svg>\n";
  double ly = y0 + 12;
  for (const auto& [name, style] : legend_) {
    const double lx = x1 - 230;
    s += "<rect x=\"" + f1(lx - 4) + "\" y=\"" + f1(ly - 10) + "\" width=\"232\" height=\"15\" fill=\"white\" fill-opacity=\"0.8\"/>";
    if (style.second == "line")
      s += "<line x1=\"" + f1(lx) + "\" y1=\"" + f1(ly - 3) + "\" x2=\"" + f1(lx + 14) + "\" y2=\"" + f1(ly - 3) + "\" stroke=\"" +
           style.first + "\" stroke-width=\"2\"/>";
    else
      s += marker(style.second, lx + 7, ly - 3, 4, style.first);
    s += "<text x=\"" + f1(lx + 20) + "\" y=\"" + f1(ly + 1) + "\">" + html_escape(name) + "</text>\n";
    ly += 15;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace rdmadiag::exporters
