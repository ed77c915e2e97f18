// One sarama consumer-group member through kgc (IBM/sarama only), reporting as it goes: it
// joins GROUP, subscribes to TOPIC and prints one JSON line on stdout per event:
//
//	{"event": "session", "member_id", "generation", "partitions"}  a session starts (Setup)
//	{"event": "claim", "partition"}                               it starts consuming a partition
//	{"event": "revoked", "partition"}                             a rebalance took one from it
//	{"event": "record", "partition", "offset", "value"}           it read a record (and marked it)
//	{"event": "end"}                                              the session ends (Cleanup)
//	{"event": "closed"}                                           it left, after its last commit
//
// With an eager strategy every rebalance ends the session and starts another; with
// cooperative-sticky the session stays and only the partitions that move are revoked and
// claimed. When its stdin closes, it closes the group client (committing what it marked;
// a static member sends no LeaveGroup) and exits 0. tests/e2e judges the events.
//
// Usage: sarama_member BOOTSTRAP TOPIC GROUP KAFKA_VERSION OPTIONS_JSON
//
//	OPTIONS_JSON: {"strategy": "range" (default) | "cooperative-sticky", "instance_id": "..." (static)}
//
// The configuration is sarama.NewConfig()'s but for Version (groups need one),
// Consumer.Offsets.Initial = OffsetOldest (records produced before it joined are read), the
// strategy, the instance id and a session timeout of 30 s, so that a restart comes back well
// within it. Every wait is bounded and any failure exits non-zero.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(event map[string]interface{}) {
	out.Lock()
	defer out.Unlock()
	if err := out.enc.Encode(event); err != nil {
		fail("stdout: %v", err)
	}
}

type member struct{ topic string }

func (m member) Setup(session sarama.ConsumerGroupSession) error {
	partitions := session.Claims()[m.topic]
	if partitions == nil {
		partitions = []int32{}
	}
	emit(map[string]interface{}{"event": "session", "member_id": session.MemberID(),
		"generation": session.GenerationID(), "partitions": partitions})
	return nil
}

func (member) Cleanup(sarama.ConsumerGroupSession) error {
	emit(map[string]interface{}{"event": "end"})
	return nil
}

func (member) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	emit(map[string]interface{}{"event": "claim", "partition": claim.Partition()})
	for msg := range claim.Messages() {
		emit(map[string]interface{}{"event": "record", "partition": msg.Partition, "offset": msg.Offset,
			"value": string(msg.Value)})
		session.MarkMessage(msg, "")
	}
	// Messages closed: the session ended (eager, or leaving), or a cooperative rebalance
	// revoked this partition while the session goes on.
	if session.Context().Err() == nil {
		emit(map[string]interface{}{"event": "revoked", "partition": claim.Partition()})
	}
	return nil
}

type options struct {
	Strategy   string `json:"strategy"`
	InstanceID string `json:"instance_id"`
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama member: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 6 {
		fail("usage: sarama_member BOOTSTRAP TOPIC GROUP KAFKA_VERSION OPTIONS_JSON")
	}
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	version, err := sarama.ParseKafkaVersion(os.Args[4])
	if err != nil {
		fail("KAFKA_VERSION: %v", err)
	}
	var opts options
	if err := json.Unmarshal([]byte(os.Args[5]), &opts); err != nil {
		fail("OPTIONS_JSON: %v", err)
	}
	time.AfterFunc(150*time.Second, func() { fail("overall time limit reached") })
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)

	config := sarama.NewConfig()
	config.ClientID = "kgc-e2e-sarama-member"
	config.Version = version
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Group.Session.Timeout = 30 * time.Second
	switch opts.Strategy {
	case "", "range":
	case "cooperative-sticky":
		config.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{
			sarama.NewBalanceStrategyCooperativeSticky()}
	default:
		fail("strategy %q: range or cooperative-sticky", opts.Strategy)
	}
	if opts.InstanceID != "" {
		config.ClientID += "-" + opts.InstanceID
		config.Consumer.Group.InstanceId = opts.InstanceID
	}
	client, err := sarama.NewConsumerGroup([]string{bootstrap}, group, config)
	if err != nil {
		fail("new consumer group: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes stdin
		cancel()
	}()
	for ctx.Err() == nil {
		if err := client.Consume(ctx, []string{topic}, member{topic}); err != nil {
			fail("consume: %v", err)
		}
	}
	if err := client.Close(); err != nil {
		fail("close: %v", err)
	}
	emit(map[string]interface{}{"event": "closed"})
}
