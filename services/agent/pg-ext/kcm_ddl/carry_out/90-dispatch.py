try:
    if event == 'end':
        create_schemas()
        create_tables()
        alter_tables()
    elif event == 'drop':
        drop_tables()
except Refusal as r:
    return [str(r), r.code, r.hint]
return None
