// make gpu-check's probe: loads the libcuda.so.1 it is given (the driver root's, by absolute path),
// asks the driver what a CUDA program asks first, and says which NVIDIA libraries the process mapped,
// so the check can prove none came from the host. No CUDA headers: the few entry points are declared
// here with the driver API's C types. Prints one JSON object on stdout; exit 0 when every call
// succeeded, 1 otherwise.
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <set>
#include <string>

namespace {

using CUresult = int;
using CUdevice = int;
struct CUuuid {
	unsigned char bytes[16];
};
using cuInit_t = CUresult (*)(unsigned);
using cuDriverGetVersion_t = CUresult (*)(int *);
using cuDeviceGetCount_t = CUresult (*)(int *);
using cuDeviceGet_t = CUresult (*)(CUdevice *, int);
using cuDeviceGetUuid_t = CUresult (*)(CUuuid *, CUdevice);

std::string json_string(const std::string &s)
{
	std::string out = "\"";
	for (char c : s) {
		if (c == '"' || c == '\\')
			out += '\\';
		if (static_cast<unsigned char>(c) < 0x20)
			continue;
		out += c;
	}
	return out + "\"";
}

std::string uuid_text(const CUuuid &u)
{
	char buf[64];
	const unsigned char *b = u.bytes;
	std::snprintf(buf, sizeof(buf), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
		      b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	return buf;
}

// Every file of an NVIDIA library the process has mapped (libcuda loads more by name at cuInit).
std::set<std::string> mapped_nvidia_libraries()
{
	std::set<std::string> out;
	std::ifstream maps("/proc/self/maps");
	std::string line;
	while (std::getline(maps, line)) {
		auto slash = line.find('/');
		if (slash == std::string::npos)
			continue;
		const std::string path = line.substr(slash);
		const std::string name = path.substr(path.rfind('/') + 1);
		if (name.rfind("libcuda", 0) == 0 || name.rfind("libnvidia-", 0) == 0 || name.find("_nvidia") != std::string::npos)
			out.insert(path);
	}
	return out;
}

}  // namespace

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: %s /path/to/libcuda.so.1\n", argv[0]);
		return 2;
	}
	void *lib = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		std::printf("{\"ok\": false, \"error\": %s}\n", json_string(std::string("dlopen: ") + ::dlerror()).c_str());
		return 1;
	}
	auto sym = [&](const char *name) { return ::dlsym(lib, name); };
	auto cu_init = reinterpret_cast<cuInit_t>(sym("cuInit"));
	auto cu_version = reinterpret_cast<cuDriverGetVersion_t>(sym("cuDriverGetVersion"));
	auto cu_count = reinterpret_cast<cuDeviceGetCount_t>(sym("cuDeviceGetCount"));
	auto cu_get = reinterpret_cast<cuDeviceGet_t>(sym("cuDeviceGet"));
	auto cu_uuid = reinterpret_cast<cuDeviceGetUuid_t>(sym("cuDeviceGetUuid_v2") ? sym("cuDeviceGetUuid_v2") : sym("cuDeviceGetUuid"));
	if (!cu_init || !cu_version || !cu_count || !cu_get || !cu_uuid) {
		std::printf("{\"ok\": false, \"error\": \"libcuda lacks a driver API entry point\"}\n");
		return 1;
	}
	std::string error;
	int version = 0, count = 0;
	std::string uuids;
	if (CUresult r = cu_init(0); r != 0)
		error = "cuInit returned " + std::to_string(r);
	else if (CUresult r = cu_version(&version); r != 0)
		error = "cuDriverGetVersion returned " + std::to_string(r);
	else if (CUresult r = cu_count(&count); r != 0)
		error = "cuDeviceGetCount returned " + std::to_string(r);
	for (int i = 0; error.empty() && i < count; i++) {
		CUdevice dev = 0;
		CUuuid u{};
		if (CUresult r = cu_get(&dev, i); r != 0)
			error = "cuDeviceGet(" + std::to_string(i) + ") returned " + std::to_string(r);
		else if (CUresult r2 = cu_uuid(&u, dev); r2 != 0)
			error = "cuDeviceGetUuid(" + std::to_string(i) + ") returned " + std::to_string(r2);
		else
			uuids += std::string(uuids.empty() ? "" : ", ") + json_string(uuid_text(u));
	}
	std::string maps;
	for (const auto &p : mapped_nvidia_libraries())
		maps += std::string(maps.empty() ? "" : ", ") + json_string(p);
	std::printf("{\"ok\": %s, \"cuda_driver_version\": %d, \"count\": %d, \"uuids\": [%s], \"mapped\": [%s]%s}\n",
		    error.empty() ? "true" : "false", version, count, uuids.c_str(), maps.c_str(),
		    error.empty() ? "" : (", \"error\": " + json_string(error)).c_str());
	return error.empty() ? 0 : 1;
}
