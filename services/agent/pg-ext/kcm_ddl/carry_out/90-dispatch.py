try:
    if event == 'end':
        # Read first: the ALTERs this function runs itself reset it.
        partition_commands = noted_partition_commands() if plpy.execute("SELECT 1 FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'ALTER TABLE' LIMIT 1") else []
        create_schemas()
        prepare_parents()
        create_tables()
        alter_tables()
        carry_partition_commands(partition_commands)
    elif event == 'drop':
        drop_tables()
except Refusal as r:
    return [str(r), r.code, r.hint]
return None
