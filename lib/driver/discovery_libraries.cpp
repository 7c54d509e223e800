// The driver's libraries and helper binaries, the native architecture check, and the check that every
// NVIDIA library one of ours loads is in the root.
#include "discovery.hpp"

#include "bounded_parse.hpp"
#include "fs.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace unbounded {

// 4. lib<name>.so.<v> of this version (no earlier ".so.": libfoo.so.1.so.<v> is not a driver
// library), under lib/<its ELF's multiarch>/; then the companions, the highest version of each.
Result<void> Discovery::add_libraries()
{
	const std::string lib_suffix = ".so." + out_.version;
	std::map<std::string, std::pair<std::string, const Entry *>> companions;  // prefix -> (version, entry)
	std::vector<std::pair<const Entry *, Error>> unresolved;
	auto is_driver_lib = [&](const Entry &e) {
		return e.name.starts_with("lib") && e.name.ends_with(lib_suffix) && e.name.find(".so.") == e.name.size() - lib_suffix.size();
	};
	// A driver is well under 200 libraries, both architectures together. Ten thousand of its
	// version are not a driver, and would cost 42 MiB and a spec over what any reader takes:
	// refused before any is read, with the count.
	if (const auto n = static_cast<std::size_t>(std::count_if(entries_.begin(), entries_.end(), is_driver_lib)); n > MAX_DRIVER_LIBRARIES)
		return fail(make_error("The staging mounts hold " + std::to_string(n) + " libraries of driver " + out_.version +
					       ", more than the " + std::to_string(MAX_DRIVER_LIBRARIES) + " a driver root is built of",
				       EXIT_NOT_READY, E2BIG));
	for (const auto &e : entries_) {
		const bool driver_lib = is_driver_lib(e);
		if (!driver_lib) {
			for (const char *p : COMPANION_PREFIXES) {
				if (!e.name.starts_with(p))
					continue;
				std::string v = e.name.substr(std::string_view(p).size());
				if (!is_library_version(v))
					continue;
				auto &slot = companions[p];
				if (slot.first.empty() || compare_versions(v, slot.first) > 0)
					slot = {v, &e};
			}
			continue;
		}
		auto src = resolve_regular(e);
		if (!src) {
			unresolved.emplace_back(&e, src.error());  // fatal unless the library is found elsewhere
			continue;
		}
		auto info = elf_info(*src);
		if (!info)
			return fail(info.error());
		std::string arch = elf::multiarch_for(info->machine, info->is_64bit);
		if (arch.empty())
			return fail(make_error("Unsupported ELF machine " + std::to_string(info->machine) + " in " + src->display));
		add(DriverFile{FileKind::Library, "lib/" + arch + (e.vdpau ? "/vdpau/" : "/") + e.name, std::move(*src), info->soname,
			       std::move(info->needed)});
	}
	// An entry that cannot be resolved is not needed when the library it names is in the root
	// from another entry: Debian's lib dir has libnvidia-nvvm.so.<v> -> /etc/alternatives/
	// nvidia--libnvidia-nvvm.so.<v>-<multiarch>, a host directory no recipe binds, while the
	// real file is in nvidia/current/. Said (which entry, and why), not warned about: nothing
	// is missing.
	for (const auto &[e, error] : unresolved) {
		const DriverFile *taken = taken_elsewhere(*e);
		if (!taken)
			return fail(error);
		out_.notes.push_back("Skipping " + e->display + ": " + error.message + "; " + e->name + " is taken from " +
				     taken->source.display);
	}
	for (const auto &[prefix, ve] : companions)
		if (auto r = add_optional_library(*ve.second, /*broken_elf_fatal=*/true); !r)
			return r;
	return add_unversioned_libraries();
}

// 4b. UNVERSIONED_LIBRARIES. Optional like the companions, and an unreadable ELF header is only a
// warning: nothing of the driver depends on them. Each architecture's goes to its own lib dir.
// One that cannot be resolved (Debian's lib dir link into /etc/alternatives, or into the other
// flavour) is not missed when its flavour's own file is taken.
Result<void> Discovery::add_unversioned_libraries()
{
	std::vector<std::pair<const Entry *, std::string>> unresolved_optional;
	for (const auto &e : entries_) {
		if (!is_unversioned_library(e.name) || e.vdpau)
			continue;
		if (auto src = resolve_regular(e); !src)
			unresolved_optional.emplace_back(&e, src.error().message);
		else
			(void)add_optional_library(e, /*broken_elf_fatal=*/false);
	}
	for (const auto &[e, why] : unresolved_optional) {
		if (const DriverFile *taken = taken_elsewhere(*e))
			out_.notes.push_back("Skipping " + e->display + ": " + why + "; " + e->name + " is taken from " + taken->source.display);
		else
			out_.warnings.push_back(why + ", skipping this optional library");
	}
	return {};
}

// A library the root is fine without: one that cannot be resolved is skipped with a warning, one of
// no architecture we know is left out; an ELF header that cannot be read fails the run or is
// another warning, as the caller says.
Result<void> Discovery::add_optional_library(const Entry &e, bool broken_elf_fatal)
{
	auto src = resolve_regular(e);
	if (!src) {
		out_.warnings.push_back(src.error().message + ", skipping this optional library");
		return {};
	}
	auto info = elf_info(*src);
	if (!info) {
		if (broken_elf_fatal)
			return fail(info.error());
		out_.warnings.push_back(info.error().message + ", skipping this optional library");
		return {};
	}
	const std::string arch = elf::multiarch_for(info->machine, info->is_64bit);
	if (!arch.empty())
		add(DriverFile{FileKind::Library, "lib/" + arch + "/" + e.name, std::move(*src), info->soname, std::move(info->needed)});
	return {};
}

// 5. The helper binaries. Useful, not essential (nvidia-ctk treats them the same): a broken one
// is skipped with a warning.
Result<void> Discovery::add_helpers()
{
	std::vector<std::pair<const Entry *, std::string>> skipped;  // said once all entries were tried
	for (const auto &e : entries_) {
		if (!is_helper(e.name))
			continue;
		auto src = resolve_regular(e);
		if (!src) {
			skipped.emplace_back(&e, src.error().message);
			continue;
		}
		if (!(src->st.st_mode & 0111)) {
			skipped.emplace_back(&e, "Skipping " + src->display + ", not executable");
			continue;
		}
		add(DriverFile{FileKind::Binary, "bin/" + e.name, std::move(*src), std::nullopt, {}});
	}
	// /usr/bin/nvidia-smi is a Debian alternatives link; when the real file is staged too (the
	// host bound /usr/lib/nvidia/current) the link is not needed. Otherwise the root has no
	// nvidia-smi, which pods notice: a warning that names what to bind (resolve() says).
	for (const auto &[e, why] : skipped) {
		if (const DriverFile *taken = taken_elsewhere(*e))
			out_.notes.push_back("Skipping " + e->display + ": " + why + "; " + e->name + " is taken from " + taken->source.display);
		else
			out_.warnings.push_back(why + ", skipping this helper binary");
	}
	return {};
}

// 7. Containers of this machine load libcuda and libnvidia-ml of its own architecture; a 32-bit
// or foreign-architecture copy satisfying the version check would give a root that cannot work.
// Checked here, on the plan, so such staging never replaces a working root.
Result<void> Discovery::check_native()
{
	const std::string native = elf::native_multiarch();
	for (const char *lib : {"libcuda.so.", "libnvidia-ml.so."}) {
		const std::string name = lib + out_.version;
		if (by_dest_.count("lib/" + native + "/" + name))
			continue;
		std::string found;
		for (const auto &[dest, f] : by_dest_)
			if (fs::basename(dest) == name)
				found += (found.empty() ? "" : ", ") + f.source.display + " (" + fs::basename(fs::dirname(dest)) + ")";
		return fail(make_error("No " + native + " " + name + " in the staging mounts" +
				       (found.empty() ? std::string() : ", only " + found) + ": this machine needs its own architecture's driver"));
	}
	out_.multiarch = native;
	return {};
}

// 8. Every NVIDIA library one of ours needs (DT_NEEDED, or loaded by name: RUNTIME_LOADS) is in
// the root, for its architecture. Binding only nvidia/current/ on Debian leaves out the private
// GL libraries (libnvidia-glcore, -eglcore, -glsi, -tls sit in the lib dir itself): EGL and GLX
// then fail in every pod while CUDA works. A warning, not a failure: CUDA pods are fine.
// The image's libraries (libc, libm, libX11, ...) are not ours to check.
Result<void> Discovery::check_closure()
{
	// Most roots have nothing to check (only the GL and EGL libraries need others of ours).
	const bool any = std::any_of(by_dest_.begin(), by_dest_.end(), [&](const auto &d) {
		const auto &f = d.second;
		return f.kind == FileKind::Library &&
		       (!f.needed.empty() || std::any_of(std::begin(RUNTIME_LOADS), std::end(RUNTIME_LOADS), [&](const RuntimeLoad &rl) {
			       return fs::basename(d.first).starts_with(rl.library_prefix);
		       }));
	});
	if (!any)
		return {};
	std::set<std::string, std::less<>> present;  // "<arch>/<name>": file names and the SONAME links made of them
	auto arch_of = [](std::string_view dest) {   // lib/<arch>[/vdpau]/<name>
		dest.remove_prefix(4);
		return dest.substr(0, dest.find('/'));
	};
	auto key = [](std::string_view arch, std::string_view name) {
		std::string k;
		k.reserve(arch.size() + 1 + name.size());
		k.append(arch).append(1, '/').append(name);
		return k;
	};
	for (const auto &[dest, f] : by_dest_) {
		if (f.kind != FileKind::Library)
			continue;
		const std::string_view arch = arch_of(dest);
		present.insert(key(arch, fs::basename(dest)));
		if (f.soname)
			present.insert(key(arch, *f.soname));
	}
	for (const auto &entry : by_dest_) {
		// Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
		const auto &dest = entry.first;
		const auto &f = entry.second;
		if (f.kind != FileKind::Library)
			continue;
		const std::string_view arch = arch_of(dest);
		const std::string name = fs::basename(dest);
		auto check = [&](const std::string &n) {
			if (present.count(key(arch, n)))
				return;
			out_.warnings.push_back(f.source.display + " needs " + n + ", which is not in the staging mounts (" + where() +
						"): bind the host directory that holds it (on Debian /usr/lib/" + std::string(arch) +
						" itself, beside nvidia/current/)");
		};
		for (const auto &n : f.needed)
			check(n);
		for (const auto &rl : RUNTIME_LOADS)
			if (name == rl.library_prefix + out_.version)
				check(rl.loads_prefix + out_.version);
	}
	return {};
}

}  // namespace unbounded
