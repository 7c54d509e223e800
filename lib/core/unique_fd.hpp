// Move-only owner of a file descriptor, after libcamera's UniqueFD: release() must be used, reset()
// closes, and the destructor never throws.
#pragma once

#include <unistd.h>
#include <utility>

namespace unbounded {

class UniqueFd {
public:
	UniqueFd() noexcept = default;
	explicit UniqueFd(int fd) noexcept : fd_(fd) {}
	UniqueFd(UniqueFd &&other) noexcept : fd_(other.release()) {}
	UniqueFd &operator=(UniqueFd &&other) noexcept
	{
		reset(other.release());
		return *this;
	}
	UniqueFd(const UniqueFd &) = delete;
	UniqueFd &operator=(const UniqueFd &) = delete;
	~UniqueFd() { reset(); }

	[[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
	void reset(int fd = -1) noexcept
	{
		int old = std::exchange(fd_, fd);
		if (old >= 0)
			::close(old);
	}
	int get() const noexcept { return fd_; }
	bool valid() const noexcept { return fd_ >= 0; }
	explicit operator bool() const noexcept { return valid(); }

private:
	int fd_ = -1;
};

}  // namespace unbounded
