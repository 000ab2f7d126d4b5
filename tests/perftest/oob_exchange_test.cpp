// OobTransport::exchange_message on the client: a SEND whose completion failed with
// LOC_QP_OP_ERR (siw, the peer closing right after it read the message: lab_perftest_siw_cm
// step 13, session 15) counts as delivered only when the peer's answer arrives.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "perftest/errors.h"
#include "perftest/oob_channel.h"

using rdmadiag::perftest::OobTransport;
using rdmadiag::perftest::RunError;
using rdmadiag::perftest::SendNotConfirmed;

namespace {
// A message transport whose SEND and receive outcomes the test sets.
class ScriptedTransport : public OobTransport {
 public:
  enum class SendOutcome { Ok, NotConfirmed, Failed };
  SendOutcome send_outcome = SendOutcome::Ok;
  std::optional<std::string> answer;  // nullopt: the receive fails (peer gone, timeout)
  int receives = 0;

  bool is_client() const override { return true; }
  const std::string& peer() const override { return peer_; }
  void send(std::span<const char>, const std::string& step) override {
    if (send_outcome == SendOutcome::NotConfirmed) throw SendNotConfirmed(step + ": LOC_QP_OP_ERR on the SEND");
    if (send_outcome == SendOutcome::Failed) throw RunError(step + ": WR_FLUSH_ERR on the SEND");
  }
  std::vector<char> receive(std::size_t, const std::string& step, int) override { return receive_message(step, 0); }
  std::vector<char> receive_message(const std::string& step, int) override {
    ++receives;
    if (!answer) throw RunError(step + ": the connection is closed");
    return {answer->begin(), answer->end()};
  }
  bool message_based() const override { return true; }
  std::vector<char> drain(int) override { return {}; }

 private:
  std::string peer_ = "10.77.0.1";
};

const std::string kMine = "client key";
std::span<const char> mine() { return {kMine.data(), kMine.size()}; }
}  // namespace

TEST(OobExchange, UnconfirmedSendIsDeliveredWhenThePeerAnswers) {
  ScriptedTransport t;
  t.send_outcome = ScriptedTransport::SendOutcome::NotConfirmed;
  t.answer = "server key";
  std::vector<std::string> warnings;
  const auto got = t.exchange_message(mine(), "final barrier", 1000, &warnings);
  EXPECT_EQ(std::string(got.begin(), got.end()), "server key");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("the peer answered it"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("LOC_QP_OP_ERR"), std::string::npos) << warnings[0];
}

TEST(OobExchange, UnconfirmedSendWithoutAnswerFailsWithTheSendError) {
  ScriptedTransport t;
  t.send_outcome = ScriptedTransport::SendOutcome::NotConfirmed;
  std::vector<std::string> warnings;
  try {
    (void)t.exchange_message(mine(), "final barrier", 1000, &warnings);
    FAIL() << "an unanswered, unconfirmed SEND must fail the exchange";
  } catch (const SendNotConfirmed& e) {
    EXPECT_NE(std::string(e.what()).find("LOC_QP_OP_ERR"), std::string::npos) << e.what();
  }
  EXPECT_EQ(t.receives, 1);
  EXPECT_TRUE(warnings.empty());
}

TEST(OobExchange, OtherSendErrorsFailAtOnce) {
  ScriptedTransport t;
  t.send_outcome = ScriptedTransport::SendOutcome::Failed;
  t.answer = "server key";
  EXPECT_THROW((void)t.exchange_message(mine(), "final barrier", 1000), RunError);
  EXPECT_EQ(t.receives, 0);
}

TEST(OobExchange, ConfirmedSendThenAnswer) {
  ScriptedTransport t;
  t.answer = "server key";
  std::vector<std::string> warnings;
  const auto got = t.exchange_message(mine(), "address exchange", 1000, &warnings);
  EXPECT_EQ(std::string(got.begin(), got.end()), "server key");
  EXPECT_TRUE(warnings.empty());
}
