$py$;

