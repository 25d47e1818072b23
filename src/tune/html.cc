// tune's HTML page: the comparison table and the summary (charts follow the report module's).
#include <fmt/format.h>

#include "spec/layout.h"
#include "tune/tune.h"

namespace pentamesh::tune {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string Html(const Result& r) {
  std::string page = "<!doctype html><html><head><meta charset=\"utf-8\"><title>pentamesh tune: " +
                     Escape(r.model_name) + "</title></head><body>";
  page += "<h1>pentamesh tune: " + Escape(r.model_name) + "</h1><p>" + Escape(r.host) + "</p>";
  page += "<pre>" + Escape(Table(r)) + "</pre></body></html>\n";
  return page;
}

}  // namespace pentamesh::tune
