import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads a topic back with Java's own KafkaConsumer and prints every record as one JSON line.
 *
 * <pre>java -cp 'libs/*:classes' ReadBack BOOTSTRAP TOPIC EXPECTED ISOLATION TIMEOUT_S [GRACE_S]</pre>
 *
 * Every partition is assigned (no consumer group) and read from offset 0 until EXPECTED records
 * arrived, then GRACE_S seconds more (extras such as duplicates show up), or until TIMEOUT_S.
 * Keys, values and header values are base64 (null stays null). The last line is
 * {"done":true,...}. The consumer checks every batch's CRC (check.crcs defaults to true), so a
 * batch Java cannot decode fails the run with its exception on stderr and exit code 1.
 */
public final class ReadBack {
    private ReadBack() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: ReadBack BOOTSTRAP TOPIC EXPECTED ISOLATION TIMEOUT_S [GRACE_S]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        long expected = Long.parseLong(args[2]);
        String isolation = args[3];
        long timeoutNs = (long) (Double.parseDouble(args[4]) * 1e9);
        long graceNs = (long) (Double.parseDouble(args.length > 5 ? args[5] : "1.0") * 1e9);

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-read-back");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10000");
        props.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");

        long start = System.nanoTime();
        long deadline = start + timeoutNs;
        long count = 0;
        boolean timedOut = false;
        BufferedWriter out = new BufferedWriter(
            new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = partitionsOf(consumer, topic, deadline);
            consumer.assign(partitions);
            for (TopicPartition tp : partitions) {
                consumer.seek(tp, 0L);
            }
            long graceEnd = -1;
            while (true) {
                long now = System.nanoTime();
                if (graceEnd < 0 && count >= expected) {
                    graceEnd = now + graceNs;
                }
                long end = graceEnd >= 0 ? graceEnd : deadline;
                if (now >= end) {
                    timedOut = graceEnd < 0;
                    break;
                }
                long waitMs = Math.max(1, Math.min(200, (end - now) / 1_000_000));
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(waitMs));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    out.write(toJson(r));
                    out.write('\n');
                    count++;
                }
            }
        }
        out.write("{\"done\":true,\"count\":" + count + ",\"timedOut\":" + timedOut + "}\n");
        out.flush();
    }

    private static List<TopicPartition> partitionsOf(
            KafkaConsumer<byte[], byte[]> consumer, String topic, long deadline) throws InterruptedException {
        while (true) {
            long leftMs = Math.max(500, (deadline - System.nanoTime()) / 1_000_000);
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofMillis(leftMs));
            if (infos != null && !infos.isEmpty()) {
                List<TopicPartition> out = new ArrayList<>();
                for (PartitionInfo info : infos) {
                    out.add(new TopicPartition(topic, info.partition()));
                }
                return out;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("topic " + topic + " has no partitions in metadata");
            }
            Thread.sleep(100);
        }
    }

    private static String toJson(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder sb = new StringBuilder(256);
        sb.append("{\"partition\":").append(r.partition())
          .append(",\"offset\":").append(r.offset())
          .append(",\"key\":").append(b64(r.key()))
          .append(",\"value\":").append(b64(r.value()))
          .append(",\"headers\":[");
        boolean first = true;
        for (Header h : r.headers()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append('[');
            quote(sb, h.key());
            sb.append(',').append(b64(h.value())).append(']');
        }
        sb.append("],\"timestamp\":").append(r.timestamp())
          .append(",\"timestampType\":");
        quote(sb, r.timestampType().name);
        sb.append(",\"leaderEpoch\":").append(r.leaderEpoch().orElse(-1)).append('}');
        return sb.toString();
    }

    private static String b64(byte[] data) {
        return data == null ? "null" : "\"" + Base64.getEncoder().encodeToString(data) + "\"";
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
