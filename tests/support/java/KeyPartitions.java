import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The partition Java's producer picks for each key of a topic, computed by Java itself.
 *
 * <pre>java -cp 'libs/*:classes' KeyPartitions BOOTSTRAP TOPIC TIMEOUT_S &lt; keys</pre>
 *
 * Asks the broker for TOPIC's partition count, then reads one base64 key per line on stdin (an
 * empty line is the empty key, which is a key: only a null key goes to the sticky partitioner)
 * and prints one JSON line: {"numPartitions":N,"partitions":[p0,p1,...]}, each from
 * BuiltInPartitioner.partitionForKey, the method KafkaProducer.partition() calls for a keyed
 * record without an explicit partition or custom partitioner.
 */
public final class KeyPartitions {
    private KeyPartitions() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: KeyPartitions BOOTSTRAP TOPIC TIMEOUT_S < base64 keys");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-key-partitions");
        long timeoutMs = (long) (Double.parseDouble(args[2]) * 1000);
        int numPartitions;
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<PartitionInfo> infos = consumer.partitionsFor(args[1], Duration.ofMillis(timeoutMs));
            if (infos == null || infos.isEmpty()) {
                throw new IllegalStateException("topic " + args[1] + " has no partitions in metadata");
            }
            numPartitions = infos.size();
        }
        StringBuilder sb = new StringBuilder("{\"numPartitions\":").append(numPartitions)
            .append(",\"partitions\":[");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        String line;
        boolean first = true;
        while ((line = in.readLine()) != null) {
            byte[] key = Base64.getDecoder().decode(line.trim());
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append(BuiltInPartitioner.partitionForKey(key, numPartitions));
        }
        sb.append("]}");
        System.out.println(sb);
    }
}
