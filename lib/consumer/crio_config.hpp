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

// The newest cdiVersion CRI-O's CDI library accepts: 1.35 and later 1.1.0, 1.34 1.0.0, older "" (not
// known here: the package's Built-Using decides when Debian names the library).
std::string max_cdi_version_for_crio(int major, int minor);

}  // namespace unbounded
