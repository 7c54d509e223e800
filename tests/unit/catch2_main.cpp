// Catch2 v2 main with a TAP reporter that emits one line per test case (Catch2's own TAP reporter
// emits one per assertion, which would inflate the counts meson and CI report).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <sstream>

namespace {

class CaseTapReporter : public Catch::StreamingReporterBase<CaseTapReporter> {
public:
	using StreamingReporterBase::StreamingReporterBase;

	static std::string getDescription() { return "TAP, one line per test case"; }

	void noMatchingTestCases(const std::string &spec) override { stream << "# no test cases match " << spec << "\n"; }
	void assertionStarting(const Catch::AssertionInfo &) override {}

	bool assertionEnded(const Catch::AssertionStats &stats) override
	{
		const auto &r = stats.assertionResult;
		if (r.isOk())
			return true;
		std::ostringstream msg;
		msg << r.getSourceInfo().file << ":" << r.getSourceInfo().line << ": ";
		if (r.hasExpression())
			msg << r.getExpressionInMacro() << " with expansion " << r.getExpandedExpression();
		if (r.hasMessage())
			msg << " " << r.getMessage();
		for (const auto &info : stats.infoMessages)
			msg << " [" << info.message << "]";
		std::string s = msg.str();
		for (auto &c : s)
			if (c == '\n')
				c = ' ';
		failures_ += "# " + s + "\n";
		return true;
	}

	void testCaseEnded(const Catch::TestCaseStats &stats) override
	{
		const bool ok = stats.totals.assertions.failed == 0 && stats.totals.testCases.failed == 0;
		stream << (ok ? "ok " : "not ok ") << ++n_ << " - " << stats.testInfo.name << "\n"
		       << failures_;
		failures_.clear();
		StreamingReporterBase::testCaseEnded(stats);
	}

	void testRunEnded(const Catch::TestRunStats &stats) override
	{
		stream << "1.." << n_ << "\n";
		StreamingReporterBase::testRunEnded(stats);
	}

private:
	int n_ = 0;
	std::string failures_;
};

}  // namespace

CATCH_REGISTER_REPORTER("casetap", CaseTapReporter)
