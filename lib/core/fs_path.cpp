// Path strings: joining, splitting and the --root prefix (no system calls).
#include "fs.hpp"

#include <string>
#include <vector>

namespace unbounded::fs {

std::string root_path(std::string_view root, std::string_view absolute)
{
	if (root.empty() || root == "/")
		return std::string(absolute);
	std::string r{root};
	while (r.size() > 1 && r.back() == '/')
		r.pop_back();
	if (!absolute.empty() && absolute.front() != '/')
		r += '/';
	r += absolute;
	return r;
}

std::string join(std::string_view dir, std::string_view name)
{
	if (dir.empty())
		return std::string(name);
	std::string r{dir};
	if (r.back() != '/')
		r += '/';
	r += name;
	return r;
}

std::string dirname(std::string_view path)
{
	while (path.size() > 1 && path.back() == '/')
		path.remove_suffix(1);
	auto pos = path.rfind('/');
	if (pos == std::string_view::npos)
		return ".";
	if (pos == 0)
		return "/";
	return std::string(path.substr(0, pos));
}

std::string basename(std::string_view path)
{
	while (path.size() > 1 && path.back() == '/')
		path.remove_suffix(1);
	auto pos = path.rfind('/');
	return std::string(pos == std::string_view::npos ? path : path.substr(pos + 1));
}

std::vector<std::string> split_path(std::string_view p)
{
	std::vector<std::string> out;
	std::size_t i = 0;
	while (i < p.size()) {
		std::size_t j = p.find('/', i);
		if (j == std::string_view::npos)
			j = p.size();
		if (j > i)
			out.emplace_back(p.substr(i, j - i));
		i = j + 1;
	}
	return out;
}

}  // namespace unbounded::fs
