// One static member (KIP-345) of a sarama consumer group through kgc: it joins GROUP with
// Consumer.Group.InstanceId = INSTANCE_ID and subscribes to TOPIC, and prints one JSON line
// on stdout as each of its sessions starts ({"event": "session", "member_id", "generation",
// "partitions"}) and ends ({"event": "end"}). It reads nothing: what the test judges is
// membership. When its stdin closes it closes the group client, which for a static member
// sends no LeaveGroup (sarama, as the Java client, leaves that to the session timeout), prints
// {"event": "closed"} and exits 0, so that a new process with the same instance id can take
// its place as a restart does; tests/e2e/test_sarama.py judges whether the group rebalanced.
//
// Usage: sarama_static BOOTSTRAP TOPIC GROUP INSTANCE_ID KAFKA_VERSION
//
// The configuration is sarama.NewConfig()'s but for Version (groups need one), the instance
// id and a session timeout of 30 s, so that a restart comes back well within it. IBM/sarama
// only: sarama 1.22 has no static membership. Every wait is bounded and any failure exits
// non-zero.
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
	<-session.Context().Done()
	return nil
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama static: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 6 {
		fail("usage: sarama_static BOOTSTRAP TOPIC GROUP INSTANCE_ID KAFKA_VERSION")
	}
	bootstrap, topic, group, instance := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	version, err := sarama.ParseKafkaVersion(os.Args[5])
	if err != nil {
		fail("KAFKA_VERSION: %v", err)
	}
	time.AfterFunc(150*time.Second, func() { fail("overall time limit reached") })
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)

	config := sarama.NewConfig()
	config.ClientID = "kgc-e2e-sarama-" + instance
	config.Version = version
	config.Consumer.Group.InstanceId = instance
	config.Consumer.Group.Session.Timeout = 30 * time.Second
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
