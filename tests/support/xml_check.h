// A tiny well-formedness check of XML, enough for the SVG files mixp writes: every element
// closed in order, attributes quoted, entities known. Counts the elements by name.
#pragma once

#include <cctype>
#include <map>
#include <string>
#include <vector>

namespace mixp::test {

struct XmlCheck {
  bool ok = false;
  std::string error;
  std::string root;
  std::map<std::string, int> elements;  ///< count by name
};

inline XmlCheck check_xml(const std::string& s) {
  XmlCheck r;
  std::vector<std::string> open;
  size_t i = 0;
  auto fail = [&](const std::string& why) {
    r.ok = false;
    r.error = why + " at byte " + std::to_string(i);
    return r;
  };
  auto check_text = [](const std::string& s, size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) {
      if (s[k] == '<') return false;
      if (s[k] == '&') {
        const size_t semi = s.find(';', k);
        if (semi == std::string::npos || semi >= to) return false;
        const std::string ent = s.substr(k + 1, semi - k - 1);
        if (ent != "amp" && ent != "lt" && ent != "gt" && ent != "quot" && ent != "apos")
          return false;
      }
    }
    return true;
  };
  if (s.compare(0, 5, "<?xml") == 0) {
    i = s.find("?>");
    if (i == std::string::npos) return fail("unterminated XML declaration");
    i += 2;
  }
  while (i < s.size()) {
    const size_t lt = s.find('<', i);
    const size_t text_end = lt == std::string::npos ? s.size() : lt;
    if (!check_text(s, i, text_end)) return fail("bad text");
    if (open.empty() && !r.root.empty()) {
      for (size_t k = i; k < text_end; ++k)
        if (!std::isspace(static_cast<unsigned char>(s[k]))) return fail("text after the root");
    }
    if (lt == std::string::npos) break;
    i = lt;
    const size_t gt = s.find('>', i);
    if (gt == std::string::npos) return fail("unterminated tag");
    std::string tag = s.substr(i + 1, gt - i - 1);
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return fail("mismatched </" + name + ">");
      open.pop_back();
    } else {
      const bool self_closing = !tag.empty() && tag.back() == '/';
      if (self_closing) tag.pop_back();
      size_t k = 0;
      while (k < tag.size() && (std::isalnum(static_cast<unsigned char>(tag[k])) || tag[k] == '-' ||
                                tag[k] == ':' || tag[k] == '_'))
        ++k;
      const std::string name = tag.substr(0, k);
      if (name.empty()) return fail("element without a name");
      if (open.empty() && !r.root.empty()) return fail("a second root element");
      if (r.root.empty()) r.root = name;
      // Attributes: name="value" pairs.
      while (k < tag.size()) {
        while (k < tag.size() && std::isspace(static_cast<unsigned char>(tag[k]))) ++k;
        if (k == tag.size()) break;
        const size_t eq = tag.find('=', k);
        if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"')
          return fail("unquoted attribute in <" + name + ">");
        const size_t close = tag.find('"', eq + 2);
        if (close == std::string::npos) return fail("unterminated attribute in <" + name + ">");
        if (!check_text(tag, eq + 2, close)) return fail("bad attribute value in <" + name + ">");
        k = close + 1;
      }
      ++r.elements[name];
      if (!self_closing) open.push_back(name);
    }
    i = gt + 1;
  }
  if (!open.empty()) return fail("<" + open.back() + "> is not closed");
  if (r.root.empty()) return fail("no element");
  r.ok = true;
  return r;
}

}  // namespace mixp::test
