-- Which secret-box key (src/lib/secret-box.ts key id) sealed the endpoint's secret when the delivery was
-- queued. A dispatcher claims only deliveries it can sign: processes of one installation share the key,
-- so this changes nothing there, while a process started with another key (a misconfiguration, a key
-- migration, or test processes sharing one database) leaves them to the processes that can, instead of
-- failing them.
alter table webhook_deliveries add column key_id text not null default '';
