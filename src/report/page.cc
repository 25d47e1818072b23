#include "report/page.h"

#include "core/output.h"
#include "report/chart.h"
#include "report/svg.h"

namespace pentamesh::report {

std::string HtmlPage(const std::string& title, const std::string& body,
                     const PageOptions& options) {
  std::string html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" +
                     Escape(title) + "</title>\n" + kPageStyle + options.extra_style;
  if (options.charts) html += ChartLibraryScript();
  return html + "</head><body>\n" + body + "</body></html>\n";
}

core::Status WritePage(const std::string& path, const std::string& html, const std::string& flag) {
  const core::Status st = core::WriteFileAtomic(path, html);
  return st.ok() ? st : core::Status::Error(flag + ": " + st.message());
}

}  // namespace pentamesh::report
