// The unit tier's replay of the fuzz targets, built with g++ and no libFuzzer: every checked-in
// input (fuzz/corpus/<target>/ and fuzz/regressions/<target>/, and the binary seeds the build
// generates) is run once through its target's contract. A violated contract aborts, after the input's
// name has been printed; a crash is a crash.
//   fuzz-replay DIR...   DIR/<target>/<input> for every registered target
// An input named *.hex is hex digits (whitespace and #-comment lines ignored): how binary inputs are
// checked in. Any other file is its bytes.
#include "fuzz_target.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace unbounded::fuzz {

namespace {

std::map<std::string, OneInput> &targets()
{
	static std::map<std::string, OneInput> t;
	return t;
}

std::string from_hex(const std::string &text, const std::string &name)
{
	std::string out, digits;
	std::istringstream in(text);
	for (std::string line; std::getline(in, line);) {
		if (!line.empty() && line[0] == '#')
			continue;
		for (char c : line)
			if (std::isxdigit(static_cast<unsigned char>(c)))
				digits += c;
			else if (!std::isspace(static_cast<unsigned char>(c))) {
				std::fprintf(stderr, "%s: not hex: '%c'\n", name.c_str(), c);
				std::exit(1);
			}
	}
	if (digits.size() % 2) {
		std::fprintf(stderr, "%s: an odd number of hex digits\n", name.c_str());
		std::exit(1);
	}
	for (std::size_t i = 0; i < digits.size(); i += 2)
		out += static_cast<char>(std::stoi(digits.substr(i, 2), nullptr, 16));
	return out;
}

}  // namespace

bool register_target(const char *name, OneInput f)
{
	targets()[name] = f;
	return true;
}

}  // namespace unbounded::fuzz

int main(int argc, char **argv)
{
	namespace fs = std::filesystem;
	using namespace unbounded::fuzz;
	if (argc < 2) {
		std::fprintf(stderr, "usage: %s DIR...\n", argv[0]);
		return 2;
	}
	std::size_t ran = 0;
	for (int a = 1; a < argc; a++) {
		if (!fs::is_directory(argv[a])) {
			std::fprintf(stderr, "%s is not a directory\n", argv[a]);
			return 1;
		}
		for (const auto &t : fs::directory_iterator(argv[a])) {
			const std::string name = t.path().filename();
			if (!t.is_directory())
				continue;
			auto it = targets().find(name);
			if (it == targets().end()) {
				std::fprintf(stderr, "%s: no fuzz target is named %s\n", t.path().c_str(), name.c_str());
				return 1;
			}
			std::vector<fs::path> inputs;
			for (const auto &f : fs::directory_iterator(t.path()))
				if (f.is_regular_file())
					inputs.push_back(f.path());
			std::sort(inputs.begin(), inputs.end());
			for (const auto &f : inputs) {
				std::ifstream in(f, std::ios::binary);
				std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
				if (f.extension() == ".hex")
					bytes = from_hex(bytes, f);
				std::fprintf(stderr, "%s\n", f.c_str());
				it->second(reinterpret_cast<const std::uint8_t *>(bytes.data()), bytes.size());
				ran++;
			}
		}
	}
	std::printf("replayed %zu inputs\n", ran);
	return ran ? 0 : 1;
}
