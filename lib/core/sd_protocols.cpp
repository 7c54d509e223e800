#include "sd_protocols.hpp"

#include "unique_fd.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace unbounded {
namespace {

bool send_datagram(const std::string &address, std::string_view payload)
{
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	if (address.size() < 2 || address.size() >= sizeof(sa.sun_path))
		return false;
	std::memcpy(sa.sun_path, address.data(), address.size());
	socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
	if (address[0] == '@')
		sa.sun_path[0] = '\0';  // abstract namespace
	else if (address[0] == '/')
		len += 1;  // include the NUL of a path name
	else
		return false;

	UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
	if (!fd)
		return false;
	ssize_t n;
	do
		n = ::sendto(fd.get(), payload.data(), payload.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr *>(&sa), len);
	while (n < 0 && errno == EINTR);
	return n == static_cast<ssize_t>(payload.size());
}

std::string journal_serialize(const std::vector<std::pair<std::string, std::string>> &fields)
{
	std::string out;
	for (const auto &[key, value] : fields) {
		out += key;
		if (value.find('\n') == std::string::npos) {
			out += '=';
			out += value;
		} else {
			// Binary-safe form: KEY\n, 64-bit little-endian length, the bytes.
			out += '\n';
			std::uint64_t len = value.size();
			for (int i = 0; i < 8; i++)
				out += static_cast<char>((len >> (8 * i)) & 0xff);
			out += value;
		}
		out += '\n';
	}
	return out;
}

}  // namespace

void notify_status(std::string_view status)
{
	const char *e = std::getenv("NOTIFY_SOCKET");
	if (!e || !*e)
		return;
	std::string msg = "STATUS=";
	msg += status;
	(void)send_datagram(e, msg);
}

namespace sd {

bool journal_send(const std::vector<std::pair<std::string, std::string>> &fields)
{
	return send_datagram("/run/systemd/journal/socket", journal_serialize(fields));
}

}  // namespace sd
}  // namespace unbounded
