// sarama through a kgc with TLS and SASL (or mTLS): one member joins GROUP, consumes COUNT
// records from partition 0 of TOPIC, commits them and leaves.
//
// Usage: sarama_secure BOOTSTRAP TOPIC GROUP COUNT SECURITY_JSON
// SECURITY_JSON: {"ca": file, "cert": file?, "key": file?, "mechanism": "SCRAM-SHA-512"|"PLAIN"?,
// "username"?, "password"?}, as tests/e2e/js/secure.mjs takes it. sarama has no SCRAM of its
// own: it takes a client, here xdg-go/scram's (what sarama's own examples use). Prints one
// JSON line ({"consumed": n}); every wait is bounded, and any failure (an authentication
// error included) exits non-zero with the error on stderr.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

type security struct {
	CA        string `json:"ca"`
	Cert      string `json:"cert"`
	Key       string `json:"key"`
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	Password  string `json:"password"`
}

// scramClient is sarama's SCRAMClient over one xdg-go/scram conversation.
type scramClient struct {
	conversation *scram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	client, err := scram.SHA512.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conversation = client.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conversation.Step(challenge) }

func (s *scramClient) Done() bool { return s.conversation.Done() }

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama secure: "+format+"\n", args...)
	os.Exit(1)
}

func tlsConfig(sec security) *tls.Config {
	ca, err := os.ReadFile(sec.CA)
	if err != nil {
		fail("CA: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		fail("CA: no certificate in %s", sec.CA)
	}
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if sec.Cert != "" {
		cert, err := tls.LoadX509KeyPair(sec.Cert, sec.Key)
		if err != nil {
			fail("client certificate: %v", err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	return config
}

type member struct {
	count    int
	consumed int
	done     context.CancelFunc
}

func (m *member) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case message, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			session.MarkMessage(message, "")
			m.consumed++
			if m.consumed >= m.count {
				session.Commit()
				m.done()
				return nil
			}
		case <-session.Context().Done():
			return nil
		}
	}
}

func main() {
	if len(os.Args) != 6 {
		fail("usage: sarama_secure BOOTSTRAP TOPIC GROUP COUNT SECURITY_JSON")
	}
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	count, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail("COUNT: %v", err)
	}
	var sec security
	if err := json.Unmarshal([]byte(os.Args[5]), &sec); err != nil {
		fail("SECURITY_JSON: %v", err)
	}
	time.AfterFunc(45*time.Second, func() { fail("overall time limit reached") })

	config := sarama.NewConfig()
	config.ClientID = "kgc-secure-sarama"
	config.Version = sarama.V4_0_0_0
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.AutoCommit.Enable = false
	config.Metadata.Retry.Max = 1
	config.Net.TLS.Enable = true
	config.Net.TLS.Config = tlsConfig(sec)
	if sec.Mechanism != "" {
		config.Net.SASL.Enable = true
		config.Net.SASL.Mechanism = sarama.SASLMechanism(sec.Mechanism)
		config.Net.SASL.User, config.Net.SASL.Password = sec.Username, sec.Password
		config.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{} }
	}
	consumer, err := sarama.NewConsumerGroup([]string{bootstrap}, group, config)
	if err != nil {
		fail("new consumer group: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	m := &member{count: count, done: cancel}
	for ctx.Err() == nil {
		if err := consumer.Consume(ctx, []string{topic}, m); err != nil {
			fail("consume: %v", err)
		}
	}
	if err := consumer.Close(); err != nil {
		fail("close: %v", err)
	}
	if m.consumed < count {
		fail("consumed %d of %d records in time", m.consumed, count)
	}
	fmt.Printf("{\"consumed\": %d}\n", m.consumed)
}
