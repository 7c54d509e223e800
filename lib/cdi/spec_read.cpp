#include "spec_read.hpp"

#include "fs.hpp"
#include "spec_marker.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {

Result<std::string> SpecRead::bounded(std::size_t max_bytes) const
{
	const bool larger = text ? text->size() > max_bytes : text.error().errnum == EFBIG && max_bytes < cap;
	if (larger)
		return fail(errno_error(EFBIG, "Refusing to read " + path + ", it is larger than " + std::to_string(max_bytes) + " bytes"));
	return text;
}

SpecRead SpecRead::written(const std::string &path, const std::string &bytes)
{
	SpecRead f;
	f.path = path;
	f.text = bytes;
	f.ours = is_our_spec(bytes);
	return f;
}

SpecRead read_spec(const Context &ctx, const std::string &path, std::size_t cap)
{
	SpecRead f;
	f.path = path;
	f.cap = cap;
	auto fd = fs::open_regular_at(AT_FDCWD, ctx.real(path), path);
	if (!fd) {
		f.text = fail(fd.error());
		return f;
	}
	struct stat st = {};
	if (::fstat(fd->get(), &st) == 0) {
		f.dev = st.st_dev;
		f.ino = st.st_ino;
		f.mode = st.st_mode;
	}
	f.text = fs::read_fd(fd->get(), path, cap);
	if (f.text) {
		f.ours = is_our_spec(*f.text);
	} else {
		char head[128];
		const ssize_t n = ::pread(fd->get(), head, sizeof(head), 0);
		f.ours = n > 0 && is_our_spec(std::string_view(head, static_cast<std::size_t>(n)));
	}
	return f;
}

}  // namespace unbounded
