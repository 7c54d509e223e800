#include "nspawn_settings.hpp"

#include "format.hpp"

#include <algorithm>
#include <optional>

namespace unbounded::host {

namespace {

struct Line {
	std::string raw;
	std::string section;
	std::optional<SettingLine> setting;
	bool header = false;
	bool dangling = false;  // ends the file inside a continuation: the next line written would join it
};

// A physical line as systemd's parser sees it: without the CR of a CRLF ending, and the first line
// without a UTF-8 byte order mark.
std::string_view content_of(std::string_view raw, bool first)
{
	if (raw.ends_with('\r'))
		raw.remove_suffix(1);
	if (first && raw.starts_with("\xEF\xBB\xBF"))
		raw.remove_prefix(3);
	return raw;
}

bool is_comment(std::string_view t) { return !t.empty() && (t[0] == '#' || t[0] == ';'); }

// A line goes on in the next one when it ends in a backslash that no backslash before it escapes.
bool ends_in_escape(std::string_view t)
{
	std::size_t n = 0;
	while (n < t.size() && t[t.size() - 1 - n] == '\\')
		n++;
	return n % 2 == 1;
}

// systemd's parser (conf-parser.c, systemd.syntax(7)): "[Section]" headers, '#' and ';' comments,
// KEY=VALUE with blanks around both; a line ending in a backslash goes on in the next one (the
// backslash read as a blank), comment lines inside such a line skipped. A logical line keeps all its
// physical lines in `raw`, so that what is kept is written back byte for byte.
std::vector<Line> parse(std::string_view text)
{
	std::vector<Line> lines;
	std::string section;
	std::size_t pos = 0;
	while (pos < text.size()) {
		Line l;
		std::string logical;
		bool continued = false;
		do {
			std::size_t end = text.find('\n', pos);
			if (end == std::string_view::npos)
				end = text.size();
			const auto raw = text.substr(pos, end - pos);
			const bool first = pos == 0;
			pos = end + 1;
			if (!l.raw.empty() || continued)
				l.raw += '\n';
			l.raw += raw;
			// Leading blanks go; trailing ones stay until the line is whole: a backslash followed by a
			// blank escapes the blank, it does not continue the line (conf-parser.c).
			auto t = content_of(raw, first);
			while (!t.empty() && (t.front() == ' ' || t.front() == '\t'))
				t.remove_prefix(1);
			if (continued && is_comment(t))
				continue;
			logical += std::string(t);
			continued = !is_comment(logical) && ends_in_escape(logical);
			if (continued)
				logical.back() = ' ';
		} while (continued && pos < text.size());
		const auto t = trim_blanks(logical);
		if (t.starts_with('[') && t.ends_with(']')) {
			section = std::string(t.substr(1, t.size() - 2));
			l.header = true;
		} else if (!t.empty() && !is_comment(t)) {
			if (const auto eq = t.find('='); eq != std::string_view::npos)
				l.setting = SettingLine{section, std::string(trim_blanks(t.substr(0, eq))), std::string(trim_blanks(t.substr(eq + 1)))};
		}
		l.section = section;
		l.dangling = continued;
		lines.push_back(std::move(l));
	}
	return lines;
}

bool under(std::string_view path, std::string_view dir) { return path == dir || (path.starts_with(dir) && path[dir.size()] == '/'); }

}  // namespace

std::optional<BindSpec> bind_spec(const SettingLine &l)
{
	if (l.section != "Files" || (l.key != "Bind" && l.key != "BindReadOnly"))
		return std::nullopt;
	const auto colon = l.value.find(':');
	const std::string rest = colon == std::string::npos ? l.value : l.value.substr(colon + 1);
	return BindSpec{l.value.substr(0, colon), rest.substr(0, rest.find(':')), l.key == "BindReadOnly"};
}

bool owned_destination(std::string_view dest)
{
	return dest.starts_with("/run/host-nvidia/") || dest == "/run/host-nvidia-licensing" || dest == SETTINGS_MOUNT || dest.starts_with("/dev/nvidia") ||
	       under(dest, "/dev/dri") || dest == "/dev/gdrdrv" || under(dest, "/run/nvidia-persistenced") || under(dest, "/run/nvidia-fabricmanager") ||
	       under(dest, "/tmp/nvidia-mps");
}

bool owned(const SettingLine &l)
{
	if (const auto bind = bind_spec(l))
		return owned_destination(bind->dest);
	if (l.section == "Exec" && (l.key == "SetCredential" || l.key == "LoadCredential"))
		return l.value.starts_with("unbounded-nvidia.");
	return l.section == "Exec" && l.key == "SystemCallFilter" && l.value == "bpf";
}

std::vector<SettingLine> setting_lines(std::string_view text)
{
	std::vector<SettingLine> out;
	for (const auto &l : parse(text))
		if (l.setting)
			out.push_back(*l.setting);
	return out;
}

// Which lines of `lines` go out: not ours, and not the header (with its blank lines) of a section that
// held nothing but ours and is not the first of its name, where ours go now.
std::vector<bool> kept_lines(const std::vector<Line> &lines)
{
	std::vector<bool> keep(lines.size(), true);
	std::vector<std::string> seen;
	for (std::size_t i = 0; i < lines.size(); i++) {
		if (lines[i].setting && owned(*lines[i].setting))
			keep[i] = false;
		if (!lines[i].header)
			continue;
		const bool first = std::find(seen.begin(), seen.end(), lines[i].section) == seen.end();
		seen.push_back(lines[i].section);
		std::size_t end = i + 1;
		bool only_ours = true;
		for (; end < lines.size() && !lines[end].header; end++)
			if (!trim_blanks(lines[end].raw).empty() && !(lines[end].setting && owned(*lines[end].setting)))
				only_ours = false;
		if (!first && only_ours)
			for (std::size_t k = i; k < end; k++)
				keep[k] = false;
	}
	return keep;
}

std::string merge_settings(std::string_view existing, const std::vector<SettingLine> &ours)
{
	const auto lines = parse(existing);
	const auto keep = kept_lines(lines);
	std::vector<std::string> placed;
	std::string out;
	const auto place = [&](const std::string &section) {
		if (std::find(placed.begin(), placed.end(), section) != placed.end())
			return;
		for (const auto &o : ours)
			if (o.section == section)
				out += o.text() + "\n";
		placed.push_back(section);
	};
	for (std::size_t i = 0; i < lines.size(); i++) {
		if (keep[i])
			out += lines[i].raw + "\n" + (lines[i].dangling ? "\n" : "");
		// At the end of a section (the next header, or the end of the file), ours go after its last
		// line that is not blank: the blank lines before the next header stay between the two.
		const bool last_of_section = i + 1 == lines.size() || lines[i + 1].header;
		if (!last_of_section || lines[i].section.empty() || std::find(placed.begin(), placed.end(), lines[i].section) != placed.end())
			continue;
		std::size_t blanks = 0;
		// (not the empty line that ends a continuation left open at the end of the file)
		while (!lines[i].dangling && out.size() >= 2 + blanks && out[out.size() - 1 - blanks] == '\n' && out[out.size() - 2 - blanks] == '\n')
			blanks++;
		out.resize(out.size() - blanks);
		place(lines[i].section);
		out.append(blanks, '\n');
	}
	for (const auto &o : ours)
		if (std::find(placed.begin(), placed.end(), o.section) == placed.end()) {
			if (!out.empty() && !out.ends_with("\n\n"))
				out += "\n";
			out += "[" + o.section + "]\n";
			place(o.section);
		}
	return out;
}

SettingsDiff diff_settings(std::string_view existing, const std::vector<SettingLine> &ours)
{
	SettingsDiff d;
	std::vector<SettingLine> present;  // the file's lines that are ours, in file order
	for (const auto &l : parse(existing))
		if (l.setting && owned(*l.setting))
			present.push_back(*l.setting);
	for (const auto &o : ours)
		if (std::find(present.begin(), present.end(), o) == present.end())
			d.missing.push_back(o);
	for (const auto &p : present)
		if (std::find(ours.begin(), ours.end(), p) == ours.end())
			d.superfluous.push_back(p);
	return d;
}

}  // namespace unbounded::host
