// The CDI specification as its reference library (tags.cncf.io/container-device-interface, which
// containerd, CRI-O and podman link) defines it, in one place for everything here that writes or
// judges a spec: the versions it knows and what each added (specs-go/version.go), the names it takes
// (pkg/parser), and which versions each runtime release accepts (containerd's and CRI-O's go.mod at
// each tag). The writer, setup's checks, verify's model of the library and its advice all ask here.
#pragma once

#include <string>
#include <string_view>

namespace unbounded {

// The newest cdiVersion this project knows of; the oldest any spec is written with.
inline constexpr std::string_view CDI_NEWEST_VERSION = "1.1.0";
inline constexpr std::string_view CDI_FLOOR_VERSION = "0.3.0";

// Whether `version` is one the specification defines ("0.5.0"; no "v").
bool known_cdi_version(std::string_view version);

// -1, 0, 1 as CDI versions compare ("0.5.0" < "0.7.0" < "1.0.0").
int compare_cdi_versions(std::string_view a, std::string_view b);

// What a spec may use that a version of the specification added.
enum class CdiFeature {
	MountType,           // 0.4.0
	DeviceNodeHostPath,  // 0.5.0
	DigitFirstName,      // 0.5.0: a device name starting with a digit
	Annotations,         // 0.6.0
	DotInClass,          // 0.6.0: a '.' in the kind's class
	AdditionalGids,      // 0.7.0
	IntelRdt,            // 0.7.0
	NetDevices,          // 1.1.0
};

// The lowest cdiVersion a spec needs, from what it uses: CDI_FLOOR_VERSION when nothing newer.
class CdiVersionNeed {
public:
	void add(CdiFeature feature);
	std::string_view version() const { return version_; }
	// What needs it ("annotations"), "" at the floor.
	std::string_view why() const { return why_; }

private:
	std::string_view version_ = CDI_FLOOR_VERSION;
	std::string_view why_;
};

// pkg/parser: a vendor or class starts with a letter, ends with a letter or digit and holds letters,
// digits, '_', '-' and '.'; a device name may also start with a digit and hold ':'. One character
// passes for a device name; for a vendor or class the library itself panics on one letter
// (cdi_kind_panics).
bool valid_cdi_name(std::string_view name, bool device);
// Whether the library panics on this kind: validateVendorOrClassName slices name[1:len-1] once the
// first letter passed, so a vendor or class of one letter (an unqualified kind is all class).
bool cdi_kind_panics(std::string_view kind);

// The newest cdiVersion accepted by the CDI library a runtime release vendors, "" when that release
// has none (containerd before 1.7) or it is not known (CRI-O before 1.34).
std::string max_cdi_version_for_containerd(int major, int minor, int patch);
std::string max_cdi_version_for_crio(int major, int minor);
// ... and by a CDI library release, from its Debian or upstream version: each release line knows the
// spec version of its number ("0.8.0-5" -> 0.8.0, "1.0.1-2" -> 1.0.0, v0.5.4 -> 0.5.0, "1:0.8.0-1"
// -> 0.8.0, "0.8.0+really0.7.0-1" -> 0.7.0); "" when it is not a version of 0.5 or later.
std::string max_cdi_version_for_library(std::string_view library_version);

// The first containerd release that accepts the version (every later one does): "1.7.16"; "" when
// none this model knows does.
std::string first_containerd_for(std::string_view cdi_version);

}  // namespace unbounded
