// Parts of the HTML report's page (html_report.cpp) that other reports' pages
// share: the page head (style) and tail (table sorting script), summary cards,
// table cells, a latency histogram plot and the plot colours.
#pragma once
#include <cstddef>
#include <string>

#include "exporters/json_report.h"

namespace rdmadiag::exporters::html {

std::string page_head(const std::string& title);
std::string page_tail();
std::string card(const std::string& key, const std::string& value);
// A table cell; numbers carry their value so the table sorts numerically.
std::string td_num(double v, const std::string& shown);
std::string td_text(const std::string& s);
// `hist`: {"le_us": [bucket upper bounds], "counts": [...]}.
std::string histogram_plot(const Json& hist, const std::string& title);
const char* color(std::size_t i);

}  // namespace rdmadiag::exporters::html

namespace rdmadiag::exporters {
// The page of an `rdmadiag nvme` JSON report (exporters/nvme_html.cpp).
std::string render_nvme_html(const Json& report);
}  // namespace rdmadiag::exporters
