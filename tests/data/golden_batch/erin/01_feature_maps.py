print('a script, not a notebook')
