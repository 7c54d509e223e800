// unbounded-nvidia-generator NORMAL [EARLY LATE]: argument handling and logging only.
#include "config.hpp"
#include "context.hpp"
#include "generator.hpp"
#include "log.hpp"
#include "main_guard.hpp"
#include "version.hpp"
#include "virt.hpp"

#include <algorithm>
#include <string_view>

#include <cstdio>
#include <cstdlib>
#include <exception>

using namespace unbounded;

static int run(int argc, char **argv)
{
	// Generators must not talk to any process: no journal socket, stderr only (nspawn hides /dev/kmsg).
	log::init("unbounded-nvidia-generator", /*allow_journal=*/false);
	const std::string_view first = argc > 1 ? argv[1] : "";
	if (argc == 2 && (first == "--help" || first == "-h")) {
		std::printf("Usage: unbounded-nvidia-generator NORMAL-DIR [EARLY-DIR LATE-DIR]\n"
			    "       unbounded-nvidia-generator --version\n\n"
			    "A systemd generator: systemd runs it at every boot and daemon-reload. In an NVIDIA machine it puts\n"
			    "unbounded-nvidia-setup.service in front of containerd and kubelet.\n\n"
			    "Options:\n"
			    "  -h, --help      show this help\n"
			    "  --version       show the release and the commit it was built from\n\n"
			    "Exit status: 0 done, 1 the configuration could not be read, 2 usage error.\n"
			    "See unbounded-nvidia-generator(8).\n");
		return EXIT_READY;
	}
	if (argc == 2 && first == "--version") {
		print_version("unbounded-nvidia-generator");
		return EXIT_READY;
	}
	// A directory is what systemd passes, always absolute: anything else (an option, a relative path)
	// is a person at a shell, whose current directory must not get a unit tree.
	if ((argc != 2 && argc != 4) || std::any_of(argv + 1, argv + argc, [](const char *a) { return a[0] != '/'; })) {
		std::fprintf(stderr, "Usage: unbounded-nvidia-generator NORMAL-DIR [EARLY-DIR LATE-DIR]\n");
		return EXIT_USAGE;
	}
	generator::Input in;
	in.root = effective_root("");
	in.normal_dir = argv[1];
	if (const char *v = std::getenv("SYSTEMD_VIRTUALIZATION"))
		in.virtualization = v;
	std::string why;
	// Only in a container: the machine's package installed on a GPU host never orders anything in
	// front of the host's own containerd and kubelet.
	if (!container_manager(in.root, in.virtualization, why)) {
		log::debug("Not in a container (" + why + "): this is a host, whose units are its own; nothing to generate.");
		return EXIT_READY;
	}

	Error config_error;
	const generator::Decision d = generator::decide(in, &config_error);
	if (!config_error.message.empty())
		log::error(config_error.message + "; deciding from the machine alone, setup will report the error");
	for (const auto &w : d.warnings)
		log::warning(w);

	auto written = generator::write_outputs(in, d);
	if (!written) {
		log::error(written.error().message);
		return EXIT_NOT_READY;
	}
	if (d.nvidia)
		log::info("NVIDIA machine (" + d.reason + "): unbounded-nvidia-setup.service ordered before containerd and kubelet" +
			  (d.licensing ? ", license reloader enabled." : "."));
	else if (!d.stale_specs.empty())
		log::notice("Not an NVIDIA machine (" + d.reason + "), but " + d.stale_specs.front() +
			    (d.stale_specs.size() > 1 ? " and " + d.stale_specs.back() + " were" : std::string(" was")) +
			    " written by unbounded-nvidia-setup: unbounded-nvidia-cleanup.service removes " +
			    (d.stale_specs.size() > 1 ? "them" : "it") + " before containerd starts.");
	else
		log::debug("Not generating anything: " + d.reason + ".");
	return config_error.message.empty() ? EXIT_READY : EXIT_NOT_READY;
}

int main(int argc, char **argv)
{
	return guarded_main("unbounded-nvidia-generator", [&] { return run(argc, argv); });
}
