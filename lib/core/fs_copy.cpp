// Copying between file descriptors in the kernel where it can (copy_file_range, then sendfile).
#include "fs.hpp"

#include <algorithm>
#include <cerrno>
#include <sys/sendfile.h>
#include <unistd.h>

namespace unbounded::fs {

Result<std::uint64_t> copy_fd(int src, int dst, std::uint64_t size_hint, const std::string &display, std::uint64_t limit)
{
	std::uint64_t total = 0;
	enum {
		CFR,
		SENDFILE,
		RW,
	} method = CFR;
	while (total < limit) {
		std::size_t want = size_hint > total ? static_cast<std::size_t>(std::min<std::uint64_t>(size_hint - total, 1u << 30))
						     : (1u << 20);
		want = static_cast<std::size_t>(std::min<std::uint64_t>(want, limit - total));
		ssize_t n = -1;
		if (method == CFR) {
			n = ::copy_file_range(src, nullptr, dst, nullptr, want, 0);
			if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
				      errno == EPERM)) {
				method = SENDFILE;
				continue;
			}
		} else if (method == SENDFILE) {
			n = ::sendfile(dst, src, nullptr, want);
			if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
				method = RW;
				continue;
			}
		} else {
			char buf[1 << 16];
			n = ::read(src, buf, std::min(sizeof(buf), want));
			if (n > 0) {
				if (auto r = write_all(dst, std::string_view(buf, static_cast<std::size_t>(n)), display); !r)
					return fail(r.error());
			}
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(last_errno_error("Failed to copy " + display));
		}
		if (n == 0)
			break;
		total += static_cast<std::uint64_t>(n);
	}
	return total;
}

}  // namespace unbounded::fs
