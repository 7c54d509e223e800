#include "spec_marker.hpp"

#include "build_config.h"
#include "fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {

std::string spec_marker_line()
{
	return std::string(SPEC_MARKER) + PROJECT_VERSION + "; removed with it, do not edit\n";
}

bool is_our_spec(std::string_view text)
{
	return text.starts_with(SPEC_MARKER);
}

namespace {

// The marker line's worth of the file, from an fd opened with open_regular_at (O_NONBLOCK, O_NOFOLLOW,
// a regular file).
bool starts_with_marker(int fd)
{
	char buf[128];
	ssize_t n = ::pread(fd, buf, sizeof(buf), 0);
	return n > 0 && is_our_spec(std::string_view(buf, static_cast<std::size_t>(n)));
}

}  // namespace

bool file_is_our_spec(const std::string &real_path)
{
	auto fd = fs::open_regular_at(AT_FDCWD, real_path, real_path);
	return fd && starts_with_marker(fd->get());
}

Result<bool> remove_our_spec(const std::string &real_path, const std::string &display)
{
	auto dir = fs::open_dir(fs::dirname(real_path));
	if (!dir) {
		if (dir.error().errnum == ENOENT)
			return false;
		return fail(dir.error());
	}
	const std::string name = fs::basename(real_path);
	// Absent, a symlink, a FIFO, anything but a regular file: not a spec we wrote, left alone.
	auto fd = fs::open_regular_at(dir->get(), name, display);
	if (!fd || !starts_with_marker(fd->get()))
		return false;
	// Still the file that was read (not replaced in between): then it goes.
	struct stat opened = {}, now = {};
	if (::fstat(fd->get(), &opened) < 0 || ::fstatat(dir->get(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) < 0 ||
	    opened.st_dev != now.st_dev || opened.st_ino != now.st_ino)
		return false;
	if (::unlinkat(dir->get(), name.c_str(), 0) < 0)
		return fail(last_errno_error("Failed to remove " + display));
	return true;
}

}  // namespace unbounded
