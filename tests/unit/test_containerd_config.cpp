// The TOML reader on containerd's configuration shapes, the version table, and containerd 2.x's
// imports as its daemon follows them.
#include "containerd.hpp"
#include "containerd_config.hpp"
#include "temp_dir.hpp"
#include "toml_reader.hpp"
#include "unique_fd.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>

using namespace unbounded;

TEST_CASE("containerd's configuration shapes read as TOML", "[containerd]")
{
	const auto doc = parse_toml_bounded(R"(# containerd config dump, abridged
version = 2
root = "/var/lib/containerd"
imports = ["/etc/containerd/conf.d/*.toml", 'literal\path']
oom_score = -999

[grpc]
  address = "/run/containerd/containerd.sock"
  max_recv_message_size = 16_777_216

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    enable_cdi = true
    cdi_spec_dirs = [
      "/etc/cdi",   # ours
      "/var/run/cdi",
    ]
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
      ratio = 0.5
      limits = { cpu = 2, name = "a \"quoted\" \u00e9 escape" }

[[proxy_plugins.x]]
  n = 1
[[proxy_plugins.x]]
  n = 2
)",
					    "config.toml");
	REQUIRE(doc);
	const auto &cri = (*doc)["plugins"]["io.containerd.grpc.v1.cri"];
	CHECK(cri["enable_cdi"] == true);
	CHECK(cri["cdi_spec_dirs"] == nlohmann::json::array({"/etc/cdi", "/var/run/cdi"}));
	CHECK((*doc)["imports"][1] == "literal\\path");
	CHECK((*doc)["oom_score"] == -999);
	CHECK((*doc)["grpc"]["max_recv_message_size"] == 16777216);
	CHECK(cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] == true);
	CHECK(cri["containerd"]["runtimes"]["runc"]["options"]["limits"]["name"] == "a \"quoted\" \xc3\xa9 escape");
	CHECK((*doc)["proxy_plugins"]["x"].size() == 2);
	CHECK((*doc)["proxy_plugins"]["x"][1]["n"] == 2);
}

TEST_CASE("a control byte or a byte over 0x7f anywhere is past verify's limits, named", "[containerd]")
{
	// toml++ 3.3 misclassifies such bytes on its error paths: refused before it sees them, as a
	// limit of verify's (the runtime itself may read a UTF-8 comment).
	auto raw = parse_toml_bounded("name = \"\xc3\xa9\"\n", "config.toml");
	REQUIRE_FALSE(raw);
	CHECK_THAT(raw.error().message, Catch::Contains("a byte over 0x7f"));
	// Anywhere: after a backslash in a string, where toml++ reads an escape and its error path meets
	// the byte (the guard once skipped the byte after a backslash), and DEL (0x7f), in a comment here.
	for (const char *at_line_1 : {"name = \"\\\x01\"\n", "name = \"\\\xc3\"\n", "# \x7f\nname = 1\n"}) {
		auto r = parse_toml_bounded(at_line_1, "config.toml");
		REQUIRE_FALSE(r);
		CHECK_THAT(r.error().message, Catch::Contains("config.toml:1: a control byte or a byte over 0x7f"));
		CHECK(r.error().errnum == PARSE_LIMIT_ERRNO);
	}
	// What the runtimes' files hold is read: tabs, CRLF line ends, a byte-order mark at the start.
	CHECK(parse_toml_bounded("\xef\xbb\xbf[a]\r\n\tk = \"v\"\r\n", "config.toml"));
}

TEST_CASE("valid TOML that containerd's Go libraries read is read", "[containerd]")
{
	// A UTF-8 byte-order mark, and an inline table written over several lines.
	auto bom = parse_toml_bounded("\xef\xbb\xbfversion = 2\n", "config.toml");
	REQUIRE(bom);
	CHECK((*bom)["version"] == 2);
	auto inline_table = parse_toml_bounded("version = 2\n[plugins]\n  \"io.containerd.grpc.v1.cri\" = {\n    enable_cdi = false\n  }\n",
					       "config.toml");
	REQUIRE(inline_table);
	CHECK((*inline_table)["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] == false);
}

TEST_CASE("broken TOML is one error naming the file and the line", "[containerd]")
{
	auto check = [](const char *text, int line, const char *what) {
		auto r = parse_toml_bounded(text, "/etc/containerd/config.toml");
		REQUIRE_FALSE(r);
		CHECK_THAT(r.error().message, Catch::StartsWith("/etc/containerd/config.toml:" + std::to_string(line) + ":"));
		CHECK_THAT(r.error().message, Catch::Contains(what));
		CHECK(r.error().message.find('\n') == std::string::npos);
	};
	// toml++'s words (Debian's libtomlplusplus-dev), after the file, line and column.
	check("version = 2\n[plugins\n", 2, "parsing table header: expected ']'");
	check("a = 1\na = 2\n", 2, "cannot redefine existing integer 'a'");
	check("a = [1, 2\n", 1, "parsing array: encountered end-of-file");
	check("a = unquoted\n", 1, "could not determine value type");
	check("a = \"open\n", 1, "unescaped control characters");
	check("a = 1 b = 2\n", 1, "expected a comment or whitespace, saw 'b'");
	check("a = 1\n[a]\n", 2, "cannot redefine existing integer 'a' as table");
	// Issue 44, item 7: a table written twice, which containerd refuses too.
	check("[plugins.x]\n[plugins.x]\n", 2, "cannot redefine existing table");
}

TEST_CASE("TOML nesting and size are bounded", "[containerd]")
{
	const std::string deep = "a = " + std::string(5000, '[') + std::string(5000, ']') + "\n";
	auto r = parse_toml_bounded(deep, "deep.toml");
	REQUIRE_FALSE(r);
	CHECK_THAT(r.error().message, Catch::Contains("nested deeper than"));
	std::string wide = "a = [";
	for (int i = 0; i < 200000; i++)
		wide += "1,";
	wide += "]\n";
	r = parse_toml_bounded(wide, "wide.toml", ParseLimits{32, 100000});
	REQUIRE_FALSE(r);
	CHECK_THAT(r.error().message, Catch::Contains("more than 100000 values"));
}

TEST_CASE("containerd package versions", "[containerd]")
{
	CHECK(parse_containerd_version("1.7.24~ds1-6+b2")->text == "1.7.24");
	CHECK(parse_containerd_version("1:1.7.27-1")->text == "1.7.27");
	CHECK_FALSE(parse_containerd_version("git-abcdef"));
	CHECK_FALSE(parse_containerd_version("1.7.-1-1"));  // a sign is no version part
	CHECK_FALSE(parse_containerd_version("+1.7.0"));
	// From the package's version to the newest cdiVersion it accepts (cdi_model.hpp's table).
	auto max = [](const char *pkg) {
		const auto v = parse_containerd_version(pkg);
		return v ? max_cdi_version_for_containerd(v->major, v->minor, v->patch) : std::string("(no version)");
	};
	CHECK(max("1.6.20~ds1-1") == "");
	CHECK(max("1.7.24~ds1-6+b2") == "0.7.0");
	CHECK(max("2.1.9+ds1-5") == "1.0.0");
	CHECK(max("1:1.7.27-1") == "0.8.0");
	CHECK(normalize_run_path("/var/run/cdi/") == "/run/cdi");
	CHECK(normalize_run_path("/etc/cdi") == "/etc/cdi");
}

TEST_CASE("the CDI library Debian built containerd against decides the cdiVersion it accepts", "[containerd]")
{
	auto version = [](std::string_view field) {
		auto lib = cdi_library_in(field);
		return lib ? lib->version : std::string("(none)");
	};
	// The fields as trixie's and sid's containerd packages have them (shortened).
	CHECK(version("continuity (= 0.3.0-1), golang-github-containerd-nri (= 0.6.1-2), "
		      "golang-tags.cncf-container-device-interface (= 0.8.0-5), golang-x-sys (= 0.30.0-1)") == "0.8.0-5");
	CHECK(version("golang-tags.cncf-container-device-interface (= 1.0.1-2)") == "1.0.1-2");
	CHECK(cdi_library_in("golang-tags.cncf-container-device-interface (= 1.0.1-2)")->package ==
	      "golang-tags.cncf-container-device-interface");
	const auto old_name = cdi_library_in("golang-github-container-orchestrated-devices-container-device-interface (= 0.5.4-1)");
	REQUIRE(old_name);
	CHECK(old_name->package == "golang-github-container-orchestrated-devices-container-device-interface");
	CHECK(old_name->version == "0.5.4-1");
	CHECK(version("golang-tags.cncf-container-device-interface (= 1:0.8.0-1)") == "1:0.8.0-1");
	// Only the library's own source package names it; not a name that merely ends like it.
	CHECK(version("continuity (= 0.3.0-1), golang-1.24 (= 1.24.4-1)") == "(none)");
	CHECK(version("golang-foo-container-device-interface (= 9.9.9)") == "(none)");
	CHECK(version("not-golang-tags.cncf-container-device-interface (= 9.9.9)") == "(none)");
	CHECK(version("golang-tags.cncf-container-device-interface (= 0.8.0-5") == "(none)");
	CHECK(version("") == "(none)");
	// What is not a Debian version is no version (printed into messages otherwise).
	CHECK(version("golang-tags.cncf-container-device-interface (= 0.8.0 and more)") == "(none)");
	CHECK(version("golang-tags.cncf-container-device-interface (= " + std::string(65, '1') + ")") == "(none)");
	CHECK(version("golang-tags.cncf-container-device-interface (= \x1b[31m0.8.0)") == "(none)");
}

TEST_CASE("containerd 2.x's imports as its daemon follows them, for what its dump does not say", "[containerd]")
{
	test::TempDir root;
	const UniqueFd fd(::open(root.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	root.write("etc/containerd/config.toml", "version = 3\nimports = [\"conf.d/*.toml\", \"/etc/containerd/abs.toml\"]\n");
	root.write("etc/containerd/conf.d/.dot.toml", "imports = ['sub/../x.toml']\n");  // '*' takes a leading dot
	root.write("etc/containerd/conf.d/x.toml", "version = 3\n");
	root.write("etc/containerd/abs.toml", "version = 3\n");
	auto walk = walk_containerd_imports(fd.get(), "/etc/containerd/config.toml");
	CHECK(walk.files == std::vector<std::string>{"/etc/containerd/config.toml", "/etc/containerd/conf.d/.dot.toml",
						     "/etc/containerd/conf.d/x.toml", "/etc/containerd/abs.toml"});
	CHECK(walk.missing.empty());
	CHECK(walk.ambiguous.empty());
	// A relative import is joined to its own file's directory: missing there, whatever is beside
	// the main file.
	root.write("etc/containerd/conf.d/x.toml", "imports = ['abs2.toml']\n");
	root.write("etc/containerd/abs2.toml", "version = 3\n");
	walk = walk_containerd_imports(fd.get(), "/etc/containerd/config.toml");
	CHECK(walk.missing == "/etc/containerd/conf.d/abs2.toml");
	// A version-1 file with [plugins.cri] and its URI: 2.x renames both to one, in no fixed order.
	root.write("etc/containerd/conf.d/x.toml", "[plugins.cri]\n[plugins.\"io.containerd.grpc.v1.cri\"]\n");
	walk = walk_containerd_imports(fd.get(), "/etc/containerd/config.toml");
	CHECK(walk.ambiguous == "/etc/containerd/conf.d/x.toml");
	// No main file: containerd's defaults, nothing missing.
	walk = walk_containerd_imports(fd.get(), "/etc/containerd/none.toml");
	CHECK(walk.files.empty());
	CHECK(walk.missing.empty());
	// What verify cannot read is said, never taken for "nothing is missing" silently.
	root.write("etc/containerd/conf.d/x.toml", "# caf\xc3\xa9\n");
	CHECK_THAT(walk_containerd_imports(fd.get(), "/etc/containerd/config.toml").unknown, Catch::Contains("0x7f"));
}
