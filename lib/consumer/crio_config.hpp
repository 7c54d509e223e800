// CRI-O's configuration, where CRI-O is the node's runtime: CDI is always on there, and its specs
// come from [crio.runtime] cdi_spec_dirs of /etc/crio/crio.conf and the drop-ins of
// /etc/crio/crio.conf.d/ (*.conf, by name, each later key over an earlier one). A file CRI-O cannot
// parse stops it from starting. Facts: shared/reference (CRI-O's crio.conf(5)).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace unbounded {

struct CrioConfig {
	std::vector<std::string> files;  // read, in CRI-O's order
	std::string refused, refused_file;
	std::optional<std::vector<std::string>> cdi_spec_dirs;
	std::string cdi_spec_dirs_from;
	std::vector<std::string> warnings;
};

CrioConfig load_crio_config(int root_fd);

}  // namespace unbounded
