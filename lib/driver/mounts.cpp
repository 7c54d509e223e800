#include "mounts.hpp"

#include <climits>
#include <cstdlib>
#include <libmount/libmount.h>

namespace unbounded {
namespace {

MountEntry to_entry(libmnt_fs *fs)
{
	auto str = [](const char *s) { return s ? std::string(s) : std::string(); };
	return MountEntry{str(mnt_fs_get_target(fs)), str(mnt_fs_get_root(fs)), str(mnt_fs_get_fstype(fs))};
}

}  // namespace

std::string MountTable::canonical(const std::string &path)
{
	char buf[PATH_MAX];
	if (::realpath(path.c_str(), buf))
		return buf;
	return path;
}

void MountTable::Deleter::operator()(libmnt_table *t) const { mnt_unref_table(t); }

Result<MountTable> MountTable::load(const std::string &mountinfo)
{
	libmnt_table *tb = mnt_new_table();
	if (!tb)
		return fail(errno_error(ENOMEM, "Failed to allocate mount table"));
	MountTable t;
	t.table_.reset(tb);
	int r = mnt_table_parse_file(tb, mountinfo.c_str());
	if (r < 0)
		return fail(errno_error(-r, "Failed to parse " + mountinfo));
	return t;
}

std::optional<MountEntry> MountTable::mount_at(const std::string &p) const
{
	libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);  // later mounts shadow earlier ones
	if (!it)
		return std::nullopt;
	libmnt_fs *fs = nullptr;
	std::optional<MountEntry> found;
	while (mnt_table_next_fs(table_.get(), it, &fs) == 0) {
		const char *target = mnt_fs_get_target(fs);
		if (target && p == target) {
			found = to_entry(fs);
			break;
		}
	}
	mnt_free_iter(it);
	return found;
}

}  // namespace unbounded
