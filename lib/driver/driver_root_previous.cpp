// The tree that was live before a swap, held until the caller commits or rolls back.
#include "driver_root.hpp"

#include "fs.hpp"

#include <cstdio>
#include <fcntl.h>

namespace unbounded {

PreviousRoot::PreviousRoot(UniqueFd parent, std::string base, std::string held_name, std::string display, bool existed)
	: parent_(std::move(parent)), base_(std::move(base)), held_(std::move(held_name)), display_(std::move(display)),
	  existed_(existed)
{
}

PreviousRoot::~PreviousRoot()
{
	if (!done_)
		(void)commit();
}

Result<void> PreviousRoot::commit()
{
	done_ = true;
	if (!existed_)
		return {};
	return fs::remove_tree_at(parent_.get(), held_, fs::join(fs::dirname(display_), held_));
}

Result<void> PreviousRoot::rollback()
{
	done_ = true;
	const std::string held_display = fs::join(fs::dirname(display_), held_);
	if (existed_) {
		if (::renameat2(parent_.get(), held_.c_str(), parent_.get(), base_.c_str(), RENAME_EXCHANGE) < 0)
			return fail(last_errno_error("Failed to put the previous " + display_ + " back"));
	} else if (::renameat2(parent_.get(), base_.c_str(), parent_.get(), held_.c_str(), RENAME_NOREPLACE) < 0) {
		return fail(last_errno_error("Failed to move the new " + display_ + " away"));
	}
	return fs::remove_tree_at(parent_.get(), held_, held_display);
}

}  // namespace unbounded
