#include "virt.hpp"

#include "bounded_parse.hpp"
#include "format.hpp"
#include "fs.hpp"

namespace unbounded {

std::optional<std::string> container_manager(const std::string &root, const std::optional<std::string> &virtualization, std::string &why)
{
	if (virtualization) {
		const std::string &v = *virtualization;
		if (v.starts_with("container:") && v.size() > 10)
			return v.substr(10);
		why = "$SYSTEMD_VIRTUALIZATION is '" + printable(v) + "', not a container";
		return std::nullopt;
	}
	auto fd = fs::open_dir(fs::root_path(root, "/run/systemd"));
	auto text = fd ? fs::read_file_at(fd->get(), "container", "/run/systemd/container", 256) : fail(fd.error());
	const std::string name = text ? std::string(trim_blanks(*text)) : std::string();
	if (!name.empty() && is_printable(name))
		return name;
	why = text ? "/run/systemd/container is empty" : "no /run/systemd/container and no $SYSTEMD_VIRTUALIZATION";
	return std::nullopt;
}

}  // namespace unbounded
