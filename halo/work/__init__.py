"""Work: the task list, status answers in work channels, the task tools and the daily digest."""
