# Redis for compose.yaml where no registry serves redis:7: Debian's redis-server on the local
# base tree (scripts/build-images.sh), run as the redis user with its data in /data, as there.
ARG BASE_IMAGE=evalq-redis-base:local
FROM ${BASE_IMAGE}
RUN install -d -o redis -g redis -m 0750 /data
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server"]
