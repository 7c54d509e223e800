// What the installed nvidia-cdi-hook can do. Its subcommands changed across toolkit releases
// (disable-device-node-modification only exists from 1.18), and a spec that names a hook the binary
// lacks makes every container fail to start. The hook's --help is read once per binary (its device,
// inode, size, mtime and ctime), memoised in the run directory like the discovery memo; a hook that
// cannot say what it has gets no hooks at all.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace unbounded {

struct HookCommands {
	std::set<std::string> commands;  // empty: use no hook
	std::string warning;             // why not, for the log ("" when known)
	std::string memo;                // learnt now (not from the memo): the memo's text for the next run
};

// The subcommands under "COMMANDS:" in urfave/cli's help text ("help, h" gives "help").
std::set<std::string> parse_hook_help(std::string_view help);

// `real_path` is the hook (with --root applied), `display` its path in the machine. `run_dir` is the
// real path of the run directory holding the memo, which is read, never written here.
HookCommands hook_commands(const std::string &real_path, const std::string &display, const std::string &run_dir);

// The memo's text (HookCommands::memo) into the run directory `run_dir_fd` (`display` for messages).
void save_hook_memo(int run_dir_fd, const std::string &display, const std::string &memo);

}  // namespace unbounded
