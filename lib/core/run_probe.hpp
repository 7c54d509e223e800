// Running a program of the machine's to ask it about itself, as zram-generator asks modprobe rather
// than copying it: nvidia-cdi-hook --help (which commands it has), containerd --version and
// containerd config dump (its effective configuration, by its own loader).
#pragma once

#include "config.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace unbounded {

struct Probe {
	std::string path;               // as the program sees it: inside `chroot` when one is given
	std::vector<std::string> args;  // after argv[0]
	std::string chroot;             // the machine root on this host, "" or "/" for none
	Millis timeout{2000};
	std::size_t max_out = 4096;      // stdout past this is not an answer
	std::size_t max_err = 64 << 10;  // stderr's last bytes are kept
};

struct ProbeResult {
	bool ran = false;        // it was started (exec worked) and ended within its time and bounds
	bool timed_out = false;  // still running at the timeout: killed
	bool too_big = false;    // wrote more than max_out
	int status = -1;         // its exit status when it exited
	std::string out, err;    // err: its last max_err bytes
	std::string error;       // why it did not run ("chroot: Operation not permitted")

	bool ok() const { return ran && status == 0; }
	std::string last_err_line() const;
};

// Runs the program with nothing inherited but a plain environment, stdin /dev/null and no descriptor
// past stderr, without a way to gain privileges, in a process group of its own that is killed whole
// when the probe ends; chrooted into the machine root when one is given, so that every path it reads
// (its configuration and what that imports) is the machine's, and then as nobody (a file of the
// root only root may read is then unreadable to it).
ProbeResult run_program(const Probe &probe);

}  // namespace unbounded
