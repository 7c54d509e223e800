// File-system helpers: everything through *at() on directory fds, O_NOFOLLOW|O_CLOEXEC everywhere a
// path component might be attacker- or host-controlled.
#pragma once

#include "error.hpp"
#include "unique_fd.hpp"

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <vector>

namespace unbounded::fs {

// Joins a root prefix and an absolute path: root_path("/tmp/r", "/run/x") == "/tmp/r/run/x";
// an empty root leaves the path as it is.
std::string root_path(std::string_view root, std::string_view absolute);
std::string join(std::string_view dir, std::string_view name);
std::string dirname(std::string_view path);
std::string basename(std::string_view path);
// Non-empty components of a path ("a//b/" -> {"a", "b"}); "." and ".." are kept for the caller.
std::vector<std::string> split_path(std::string_view p);

Result<UniqueFd> open_dir(const std::string &path);  // O_DIRECTORY|O_NOFOLLOW on the last component
Result<UniqueFd> open_dir_at(int dirfd, const std::string &name, const std::string &display);
Result<void> mkdir_p(const std::string &path, mode_t mode);  // like mkdir -p, trusted config paths only

// Names in a directory without "." and "..", sorted unless the caller sorts what it keeps.
Result<std::vector<std::string>> list_dir(int dirfd, const std::string &display, bool sorted = true,
					  bool (*keep)(std::string_view name) = nullptr);

// The same for a directory fd of the caller's own that is read once and not used again: read where
// it stands, no second open (fewer system calls than list_dir, which counts where hundreds of small
// /proc directories are read, as for MIG instances).
Result<std::vector<std::string>> list_dir_once(int dirfd, const std::string &display);

// True when the directory has no entry but "." and ".." (reads one batch, not the whole listing).
Result<bool> dir_is_empty(int dirfd, const std::string &display);

// rm -rf of dirfd/name without following any symlink and without leaving the mount it starts on:
// a directory that is a mount point (a bind mount from the same file system included, which st_dev
// cannot tell) is never entered, and the removal then fails with EBUSY naming it. ENOENT is success.
Result<void> remove_tree_at(int dirfd, const std::string &name, const std::string &display);

// Removes the entries of dirfd whose names start with `prefix` (never directories), in constant
// memory whatever the directory holds. Failures are ignored: what is left is tried again next time.
void remove_matching(int dirfd, std::string_view prefix);

// Reads a whole small file (at most max_bytes) relative to dirfd, refusing symlinks in the last component.
Result<std::string> read_file_at(int dirfd, const std::string &name, const std::string &display,
				 std::size_t max_bytes = 16u << 20);
Result<std::string> read_file(const std::string &path, std::size_t max_bytes = 16u << 20);
// Opens dirfd/name for reading without following a symlink and without blocking (a FIFO that a
// container planted must not hang us), and refuses anything but a regular file.
Result<UniqueFd> open_regular_at(int dirfd, const std::string &name, const std::string &display);
// The target of the symlink dirfd/name ("" names dirfd itself, an O_PATH fd of the link). A target
// that does not fit PATH_MAX fails with ENAMETOOLONG instead of being cut short.
Result<std::string> read_link_at(int dirfd, const std::string &name, const std::string &display = {});
const char *file_type_name(mode_t mode);  // "a FIFO", "a directory", ...
// fstat()s an open fd and refuses anything but a regular file: "Refusing to read X, it is a FIFO, ...".
Result<void> require_regular(int fd, const std::string &display);

// Something only we may have written: of the expected type, owned by our effective UID, not
// writable by group or others, and (files) with a single link. What an unprivileged writer could
// have planted or forged is refused, not believed.
Result<void> check_trusted(int fd, const std::string &display, bool directory);
// "Open a trusted file in a trusted directory and read it, bounded": the discovery memo, the hook
// memo, a driver root's manifest, the last run's status. The directory passes check_trusted (skipped
// when dir_display is empty: the caller made it with open_private_dir, which checked it); the file is
// opened with open_regular_at (O_NOFOLLOW, O_NONBLOCK, fstat'ed regular), passes check_trusted, and is
// read whole up to max_bytes. A failure says which of those it was, for callers that treat a missing
// file apart from a forged one.
enum class TrustedStep {
	Directory,
	Open,
	File,
	Read,
};
struct TrustedText {
	UniqueFd fd;  // the file, still open (its fstat is the text's)
	std::string text;
};
struct TrustedFailure {
	TrustedStep step;
	Error error;
};
std::expected<TrustedText, TrustedFailure> read_trusted_at(int dirfd, const std::string &dir_display, const std::string &name,
							   const std::string &display, std::size_t max_bytes);
// Creates (0755) or opens the directory `path`, refusing a symlink or a directory that fails
// check_trusted(): /run/unbounded-nvidia holds the lock, the discovery memo and status.json.
Result<UniqueFd> open_private_dir(const std::string &path, const std::string &display, mode_t mode = 0755);
// Writes all of data to fd, retrying short writes and EINTR.
Result<void> write_all(int fd, std::string_view data, const std::string &display);

// Reads an open file to its end (at most max_bytes).
Result<std::string> read_fd(int fd, const std::string &display, std::size_t max_bytes = 16u << 20);

struct AtomicWriteOptions {
	mode_t mode = 0644;
	bool fsync = true;  // fsync the file and its directory (persistent /etc); off on tmpfs
	bool skip_if_unchanged = true;
	bool owner_root = false;  // chown root:root (licensing files); "unchanged" also needs that owner
	// chown to this owner (an operator's file keeps its own); "unchanged" also needs it
	std::optional<std::pair<uid_t, gid_t>> owner = std::nullopt;
};
enum class WriteOutcome {
	Written,
	Unchanged,
};
// Writes path via a temp file in the same directory, then rename(); readers see old or new bytes.
// Temp files of this path that a killed writer left are removed first (callers hold a lock).
Result<WriteOutcome> write_file_atomic(const std::string &path, std::string_view content,
				       const AtomicWriteOptions &opts = {});
// The same inside an open directory; `display` is the whole path for messages.
Result<WriteOutcome> write_file_atomic_at(int dirfd, const std::string &base, const std::string &display,
					  std::string_view content, const AtomicWriteOptions &opts = {});

// A write_file_atomic() stopped before its rename: the temp file holds the new bytes (synced when
// asked) and nothing a reader sees has changed yet. Files that must change together are all prepared
// before any is committed, so a full disk fails the run before anything changed. Dropped without
// commit(), the temp file is removed.
class PreparedWrite {
public:
	PreparedWrite() = default;
	PreparedWrite(PreparedWrite &&other) noexcept;
	PreparedWrite &operator=(PreparedWrite &&other) noexcept;
	PreparedWrite(const PreparedWrite &) = delete;
	PreparedWrite &operator=(const PreparedWrite &) = delete;
	~PreparedWrite();

	WriteOutcome outcome() const { return tmp_.empty() ? WriteOutcome::Unchanged : WriteOutcome::Written; }
	// Renames the temp file into place (nothing to do when unchanged). A failure to sync the directory
	// afterwards is not the rename's: it goes to *sync_error when given (the new bytes are already what
	// readers see), else it fails the commit.
	Result<void> commit(Error *sync_error = nullptr);

private:
	friend Result<PreparedWrite> prepare_file_atomic_at(int, const std::string &, const std::string &, std::string_view,
							    const AtomicWriteOptions &);
	void abandon() noexcept;

	UniqueFd dir_;
	std::string tmp_;  // empty: unchanged, or already committed
	std::string base_;
	std::string display_;
	bool fsync_ = false;
};
Result<PreparedWrite> prepare_file_atomic(const std::string &path, std::string_view content, const AtomicWriteOptions &opts = {});

// Copies src to dst (both regular-file fds) with copy_file_range, falling back to sendfile and then
// read/write where the kernel refuses; returns bytes copied. No per-byte loop in user space.
// At most `limit` bytes are copied: a caller that knows the size passes size + 1, so a source that
// grows while it is copied is seen to have changed instead of filling the destination.
Result<std::uint64_t> copy_fd(int src, int dst, std::uint64_t size_hint, const std::string &display,
			      std::uint64_t limit = UINT64_MAX);

// Random suffix for temp names ("XXXXXX" style, [A-Za-z0-9]).
std::string random_suffix(std::size_t len = 6);

}  // namespace unbounded::fs
