// Which service manager a run asks: the system's, or the one a --root tree holds.
#include "unit_manager.hpp"

#include "chase.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {
namespace {

constexpr const char *PRIVATE_SOCKET = "run/systemd/private";

bool live_system(const Context &ctx) { return ctx.root.empty() || ctx.root == "/"; }  // "/" as fs::root_path takes it

// The tree's run/systemd/private, O_PATH, when it is a socket of root's or ours, reached without a
// symlink and not this system's own (either would hand this system's units to a run meant for the
// tree). An fd of -1: there is none.
Result<UniqueFd> tree_manager_socket(const Context &ctx)
{
	UniqueFd root(::open(ctx.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	if (!root)
		return fail(last_errno_error("Failed to open " + ctx.root));
	ChaseHow how;
	how.flags = Chase::Beneath | Chase::NoSymlinks | Chase::NoFollow | Chase::OpenLast;
	auto found = chase(root.get(), PRIVATE_SOCKET, how);
	if (!found) {
		if (found.error().errnum == ENOENT)
			return UniqueFd();
		return fail(found.error().error);
	}
	const std::string display = ctx.real("/run/systemd/private");
	if (!S_ISSOCK(found->st.st_mode))
		return fail(make_error(display + " is not a socket"));
	if (found->st.st_uid != 0 && found->st.st_uid != ::geteuid())
		return fail(make_error(display + " is owned by UID " + std::to_string(found->st.st_uid) + ", not by root"));
	// This system's own PID 1, reached through a bind mount of /run into the tree (or a --root of
	// /proc/1/root), is not the tree's: its units are never ours to start or stop for a tree.
	struct stat own {};
	if (::stat("/run/systemd/private", &own) == 0 && own.st_dev == found->st.st_dev && own.st_ino == found->st.st_ino)
		return fail(make_error(display + " is this system's own service manager, not the tree's"));
	return std::move(found->fd);
}

}  // namespace

bool has_unit_manager(const Context &ctx)
{
	if (live_system(ctx))
		return true;
	// A socket that is not as it should be is no manager either: the checks that ask one say so.
	auto socket = tree_manager_socket(ctx);
	return socket && *socket;
}

Result<std::unique_ptr<UnitManager>> unit_manager_for(const Context &ctx)
{
	if (live_system(ctx))
		return connect_system_manager();
	auto socket = tree_manager_socket(ctx);
	if (!socket)
		return fail(socket.error());
	if (!*socket)
		return std::unique_ptr<UnitManager>();
	return connect_manager_socket(socket->get());
}

std::unique_ptr<UnitManager> unit_manager_or_why(const Context &ctx, std::string &why)
{
	auto m = unit_manager_for(ctx);
	if (!m) {
		why = m.error().message;
		return nullptr;
	}
	if (!*m)
		why = "the units of a --root tree are not this system's";
	return std::move(*m);
}

}  // namespace unbounded
