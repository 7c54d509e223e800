// unbounded-nvidia-generator NORMAL [EARLY LATE]: argument handling and logging only.
#include "config.hpp"
#include "context.hpp"
#include "generator.hpp"
#include "log.hpp"
#include "main_guard.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>

using namespace unbounded;

static int run(int argc, char **argv)
{
	// Generators must not talk to any process: no journal socket, stderr only (nspawn hides /dev/kmsg).
	log::init("unbounded-nvidia-generator", /*allow_journal=*/false);
	if (argc != 2 && argc != 4) {
		std::fprintf(stderr, "Usage: unbounded-nvidia-generator NORMAL-DIR [EARLY-DIR LATE-DIR]\n");
		return EXIT_USAGE;
	}
	generator::Input in;
	in.root = effective_root("");
	in.normal_dir = argv[1];

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
