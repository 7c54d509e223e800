#include "chase.hpp"

#include "fs.hpp"

#include <cerrno>
#include <deque>
#include <fcntl.h>
#include <unistd.h>
#include <vector>

namespace unbounded {
namespace {

class Walk {
public:
	Walk(std::string_view path, const ChaseHow &how) : path_(path), how_(how) {}

	std::expected<Chased, ChaseError> run(int root)
	{
		if (auto r = enter_root(root); !r)
			return std::unexpected(std::move(r.error()));
		push_front(path_);
		while (!todo_.empty()) {
			if (how_.steps && (*how_.steps)-- == 0) {
				*how_.steps = 0;
				return failure(ChaseStep::Budget, ETIMEDOUT, "");
			}
			std::string c = std::move(todo_.front());
			todo_.pop_front();
			if (c == ".")
				continue;
			if (c == "..") {
				if (auto r = up(); !r)
					return std::unexpected(std::move(r.error()));
				continue;
			}
			auto done = step(std::move(c));
			if (!done)
				return std::unexpected(std::move(done.error()));
			if (*done)
				return std::move(**done);
		}
		// "" or only ".", "..": the directory reached is the end
		Chased out;
		out.rel = rel_of("");
		out.dir = std::move(dirs_.back());
		out.symlinks = symlinks_;
		return out;
	}

private:
	using Step = std::expected<std::optional<Chased>, ChaseError>;

	bool flag(Chase f) const { return has(how_.flags, f); }

	std::unexpected<ChaseError> failure(ChaseStep step, int errnum, std::string_view name)
	{
		return std::unexpected(ChaseError{step, errnum, rel_of(name), symlinks_,
						  errno_error(errnum, "Failed to resolve " + std::string(path_))});
	}

	std::string rel_of(std::string_view name) const
	{
		std::string s;
		for (const auto &n : names_)
			s = fs::join(s, n);
		return name.empty() ? s : fs::join(s, name);
	}

	void push_front(std::string_view p)
	{
		auto more = fs::split_path(p);
		todo_.insert(todo_.begin(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
	}

	std::expected<void, ChaseError> enter_root(int root)
	{
		dirs_.clear();
		names_.clear();
		dirs_.emplace_back(::openat(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
		if (!dirs_.back())
			return failure(ChaseStep::Walk, errno, "");
		return {};
	}

	std::expected<void, ChaseError> up()
	{
		if (dirs_.size() > 1) {
			dirs_.pop_back();
			names_.pop_back();
		} else if (flag(Chase::Beneath)) {
			return failure(ChaseStep::Escape, EXDEV, "..");
		}
		return {};  // InRoot: ".." at the root stays there
	}

	void descend(UniqueFd fd, std::string c)
	{
		dirs_.push_back(std::move(fd));
		names_.push_back(std::move(c));
	}

	Step step(std::string c);
	Step follow(const std::string &c);

	std::string_view path_;
	const ChaseHow &how_;
	std::vector<UniqueFd> dirs_;      // the directories walked so far, the root first
	std::vector<std::string> names_;  // their names (one fewer: the root has none)
	std::deque<std::string> todo_;
	unsigned symlinks_ = 0;
};

// One component that is neither "." nor "..": a directory to enter, a symlink to follow, or the end.
Walk::Step Walk::step(std::string c)
{
	const bool last = todo_.empty();
	const int here = dirs_.back().get();
	if (!last) {
		// Most components are directories: O_DIRECTORY says so without an fstat (a symlink fails it
		// with ENOTDIR under O_NOFOLLOW and is looked at below), one system call per component.
		UniqueFd d(::openat(here, c.c_str(), O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC));
		if (d) {
			descend(std::move(d), std::move(c));
			return std::nullopt;
		}
		if (errno != ENOTDIR)
			return failure(ChaseStep::Walk, errno, c);
	}
	Chased out;
	if (last && flag(Chase::OpenLast)) {
		out.fd.reset(::openat(here, c.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
		if (!out.fd || ::fstat(out.fd.get(), &out.st) < 0)
			return failure(ChaseStep::Walk, errno, c);
	} else if (::fstatat(here, c.c_str(), &out.st, AT_SYMLINK_NOFOLLOW) < 0) {
		return failure(ChaseStep::Walk, errno, c);
	}
	if (S_ISLNK(out.st.st_mode) && (!last || !flag(Chase::NoFollow))) {
		if (auto r = follow(c); !r)
			return std::unexpected(std::move(r.error()));
		return std::nullopt;
	}
	if (!last) {
		if (!S_ISDIR(out.st.st_mode))
			return failure(ChaseStep::NotDir, ENOTDIR, c);
		// Replaced by a directory since the O_DIRECTORY open failed: enter what is there now.
		UniqueFd d(::openat(here, c.c_str(), O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC));
		if (!d)
			return failure(ChaseStep::Walk, errno, c);
		descend(std::move(d), std::move(c));
		return std::nullopt;
	}
	out.rel = rel_of(c);
	out.name = std::move(c);
	out.dir = std::move(dirs_.back());
	out.symlinks = symlinks_;
	return out;
}

// The symlink `c` in the current directory: its target's components go in front of what is left.
Walk::Step Walk::follow(const std::string &c)
{
	if (flag(Chase::NoSymlinks) || symlinks_ == CHASE_MAX_SYMLINKS)
		return failure(ChaseStep::Loop, ELOOP, c);
	symlinks_++;
	auto target = fs::read_link_at(dirs_.back().get(), c);
	if (!target)
		return failure(ChaseStep::ReadLink, target.error().errnum, c);
	if (how_.on_symlink) {
		auto jump = how_.on_symlink(rel_of(c), *target);
		if (!jump) {
			auto f = failure(ChaseStep::Hook, jump.error().errnum, c);
			f.error().error = std::move(jump.error());
			return f;
		}
		if (*jump) {
			if (auto r = enter_root((*jump)->root); !r)
				return std::unexpected(std::move(r.error()));
			push_front((*jump)->rel);
			return std::nullopt;
		}
	}
	if (target->starts_with('/')) {
		if (flag(Chase::Beneath))
			return failure(ChaseStep::Escape, EXDEV, c);
		dirs_.resize(1);
		names_.clear();
	}
	push_front(*target);
	return std::nullopt;
}

}  // namespace

std::expected<Chased, ChaseError> chase(int root, std::string_view path, const ChaseHow &how)
{
	return Walk(path, how).run(root);
}

}  // namespace unbounded
